"""``fsscope run JOB``: any registered job, headless, with its parameters as KEY=VALUE."""

from __future__ import annotations

import json

from fsscope.cli.common import add_job_args, recipe_for, target_from_args
from fsscope.cli.headless import run_job
from fsscope.engine import registry
from fsscope.errors import FsscopeError


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def cmd_run(args) -> int:
    if "help=1" in args.param:
        from fsscope.cli.spec_options import field_lines

        print("\n".join(field_lines(registry.spec_type(args.job))))
        return 0
    params = {}
    for item in args.param:
        if "=" not in item:
            raise FsscopeError(f"-p {item}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        params[key] = _value(value)
    spec = registry.spec_from_data(args.job, params)
    target = target_from_args(args, default_kind="ram")
    recipe = recipe_for(args, target)
    return run_job(args.job, spec, target, recipe, json_path=args.json, verbose=args.verbose)


def add_parser(sub) -> None:
    lines = [f"  {job.name:8s} {job.summary}" for job in registry.DESCRIPTORS]
    p = sub.add_parser("run",
                       description="Run a registered job in a background process on a target, show its progress, "
                       "record it, and print its report. Default target: a RAM image with ext4-default.",
                       epilog="jobs:\n" + "\n".join(lines) + "\n\n'fsscope run JOB -p help=1' lists a job's parameters.\n\nexample:\n  fsscope run smoke -p duration_s=3 --recipe xfs-default --ram --size 512M")
    p.add_argument("job", choices=list(registry.JOBS))
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="a job parameter")
    add_job_args(p)
    p.set_defaults(func=cmd_run)
