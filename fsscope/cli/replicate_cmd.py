"""``fsscope replicate NAME``: a seed paper's headline findings, run and judged."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope import replicate
from fsscope.cli.common import output_path, write_json
from fsscope.cli.headless import console as err
from fsscope.cli.render.replicate import render_replicate
from fsscope.errors import FsscopeError
from fsscope.format import visible

DESCRIPTION = """\
Hold fsscope to a seed paper: run the paper's headline experiments with the paper's setup as far
as this machine allows (what differs, and why, is printed: kernel and mkfs defaults, RAM or a
virtual disk instead of the paper's disk) and judge each finding: the paper's number, what the
paper's own arithmetic gives for today's geometry, what fsscope measured, and a verdict --
agree, disagree or inconclusive -- with the statistic that decided it. Nothing defaults to agree."""

EPILOG = """\
examples:
  fsscope replicate --list
  fsscope replicate aota-kono --quick --json aota.json
  fsscope replicate aota-kono --only xfs-shortform-limit,ext4-htree-start
  fsscope replicate chopper --quick
  fsscope replicate --self-test --trials 200 --json judges.json
  fsscope replicate mingardi --self-test

scenarios: aota-kono (structural tail latency of creat), cao (variation across runs),
chopper (d-span tails of ext4 vs XFS), geriatrix (aging and fragmentation), mingardi
(synchronous writes vs buffer size)."""


def cmd_replicate(args) -> int:
    if args.self_test:
        from fsscope.cli.render.replicate import render_self_test
        from fsscope.replicate.worlds import self_test

        if args.trials < 10:
            raise FsscopeError(f"replicate --self-test: --trials must be at least 10, got {args.trials}")
        checked = self_test(trials=args.trials, seed=args.seed, scenarios=(args.name,) if args.name else (),
                            progress=lambda line: err.print(Text(visible(line), style="dim")))
        render_self_test(checked, Console())
        if args.json:
            write_json(args.json, checked)
        return 0
    if args.list:
        table = Table(title="scenarios", title_justify="left")
        for col in ("name", "what", "quick", "full"):
            table.add_column(col, overflow="fold")
        for s in replicate.listing():
            table.add_row(s["name"], s["title"], f"~{s['quick_cost_s'] / 60:.0f} min",
                          f"~{s['full_cost_s'] / 60:.0f} min")
        Console().print(table)
        return 0
    if not args.name:
        raise FsscopeError("replicate: name a scenario (see 'fsscope replicate --list')")
    only = [i.strip() for i in args.only.split(",") if i.strip()] if args.only else None
    module = replicate.load(args.name)
    cost = replicate.cost_s(module, quick=args.quick, only=only)
    if not args.quick:
        err.print(f"[bold]{args.name}[/] full run: about {cost / 60:.0f} min of probes "
                  f"({len(replicate.planned(module, quick=False, only=only))} probe jobs; --quick takes "
                  f"about {replicate.cost_s(module, quick=True, only=only) / 60:.0f} min)")
    result = replicate.run(args.name, quick=args.quick, only=only,
                           progress=lambda line: err.print(Text(visible(line), style="dim")))
    render_replicate(result, Console())
    if args.json:
        write_json(args.json, result)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("replicate", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("name", nargs="?", choices=[*replicate.SCENARIOS, *replicate.SELF_TEST_ONLY], metavar="NAME",
                   help=f"the scenario: {', '.join(replicate.SCENARIOS)} (with --self-test also "
                        f"{', '.join(replicate.SELF_TEST_ONLY)})")
    p.add_argument("--list", action="store_true", help="list the scenarios and what they cost")
    p.add_argument("--quick", action="store_true", help="fewer runs and files: minutes, not tens of minutes")
    p.add_argument("--only", metavar="ID[,ID]", help="only these findings (and the probes they need)")
    p.add_argument("--self-test", action="store_true",
                   help="try every judge on simulated worlds without the paper's effect, with it and with it "
                        "reversed (no file system is touched; NAME: only its judges): false agree, power, reversed "
                        "disagree, runs for 80 %%")
    p.add_argument("--trials", type=int, default=100, metavar="N",
                   help="--self-test: draws per world (the probe's judges take a fifth; default 100)")
    p.add_argument("--seed", type=int, default=0, help="--self-test: the simulation's seed (default 0)")
    p.add_argument("--json", type=output_path, metavar="PATH",
                   help='write {"scenario", "findings": [{"id", "paper", "expected_today", "measured", '
                        '"verdict", "why"}]} to PATH; with --self-test {"judges": [{"scenario", "finding", '
                        '"false_agree", "power", "reversed_disagree", "runs_for_80", "trials", ...}]}')
    p.set_defaults(func=cmd_replicate)
