"""The README's command reference, generated from the argument parser so that it cannot drift from it.

``python -m ui.cli.reference`` prints it; paste it between the ``commands:start``/``commands:end`` markers
of README.md (tests/ui/test_cli_reference.py fails when they differ).
"""

from __future__ import annotations

import argparse

from ui.cli.main import build_parser


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """(help, parser) of each command, in the order ``--help`` lists them."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    return [(helps.get(name, ""), sub) for name, sub in action.choices.items()]


def _usage(sub: argparse.ArgumentParser) -> str:
    usage = " ".join(sub.format_usage().split())
    return usage.removeprefix("usage: ").replace(" [-h]", "")


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar or action.dest
    takes_value = action.nargs != 0
    value = f" {action.metavar or action.dest.upper()}" if takes_value else ""
    return ", ".join(action.option_strings) + value


def reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command: its usage line, what it does, and each argument and option with its help."""
    parser = parser or build_parser()
    lines = []
    for summary, sub in _subcommands(parser):
        lines.append(f"- **`{_usage(sub)}`**: {summary}")
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            lines.append(f"  - `{_name(action)}`: {action.help or ''}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
