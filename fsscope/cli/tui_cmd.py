"""``fsscope tui`` (also plain ``fsscope``): the terminal investigator."""

from __future__ import annotations

from fsscope.cli.common import add_target_args, recipe_from_args, target_from_args
from fsscope.errors import FsscopeError

THEMES = ("fsscope-dark", "fsscope-light", "fsscope-high-contrast")


def cmd_tui(args) -> int:
    from fsscope.tui import AppConfig, make_app  # Textual only when the UI is wanted
    from fsscope.tui.themes import theme_names

    if args.theme not in theme_names():  # before anything starts: a typo is not a silent fallback
        raise FsscopeError(f"--theme {args.theme}: no such theme (choose from {', '.join(theme_names())})")
    named_target = any(getattr(args, k, None) for k in ("device", "image", "ram", "dir"))
    target = target_from_args(args) if named_target else None
    recipe = recipe_from_args(args) if args.recipe or (target is not None and target.kind != "dir") else None
    app = make_app(AppConfig(target=target, recipe=recipe, theme=args.theme))
    app.run()
    return int(app.return_code or 0)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "tui",
        description="Open the investigator. The setup screen picks a target (a disk, an image file, a RAM "
        "image or a directory), a recipe (file system + mkfs/mount options + hygiene) and the jobs; Start "
        "runs them in background processes while the live screen shows progress, a per-file latency "
        "heatmap, sparklines, flags with notes, and every command run. Recorded runs can be replayed and "
        "compared. Everything works from the keyboard: F1 explains each view, ctrl+p lists every action.\n\n"
        "Without options it opens on the embedded default: as root a sparse loop image in fsscope's data "
        "directory with the ext4 recipe; otherwise a scratch directory (no formatting).",
        epilog="examples:\n  fsscope                                     the default target\n"
        "  fsscope tui --image /var/tmp/t.img --size 1G --recipe xfs-default\n"
        "  fsscope tui --ram --recipe btrfs-default --theme fsscope-light\n"
        "  fsscope tui --dir /tmp/scratch             no root needed")
    add_target_args(p)
    p.add_argument("--theme", default="fsscope-dark", metavar="NAME",
                   help=f"colour theme: {', '.join(THEMES)} (or any Textual theme); 't' cycles at run time")
    p.set_defaults(func=cmd_tui)
