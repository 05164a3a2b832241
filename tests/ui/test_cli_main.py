"""The entry points (``paperchat``, ``python app.py``) as a process starts them: Ctrl-C at any time is one line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT
from tests.processes import child_env

# Ctrl-C while the commands' modules load (most of a command's first second): the process sends itself SIGINT
# when rag.components is first imported, so the KeyboardInterrupt comes from the signal handler, as a user's would.
CTRL_C_WHILE_LOADING = """
import os, signal, sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "rag.components":
            os.kill(os.getpid(), signal.SIGINT)
sys.meta_path.insert(0, CtrlC())
from {module} import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize(("module", "argv"), [("ui.cli.main", ["search", "federated"]), ("app", ["--port", "1"])])
def test_ctrl_c_while_the_commands_load_is_one_line_and_the_interrupted_exit_code(tmp_path, module, argv):
    from ui.shared.commands import EXIT_INTERRUPTED

    result = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_LOADING.format(module=module, argv=argv)],
                            cwd=PROJECT_ROOT, env=child_env(PAPERCHAT_DATA_DIR=str(tmp_path)), capture_output=True,
                            text=True, timeout=60)
    assert (result.returncode, result.stderr, result.stdout) == (EXIT_INTERRUPTED, "paperchat: interrupted\n", "")


def test_the_entry_point_loads_no_command_before_its_ctrl_c_handler_is_in_place():
    heavy = ("rag.components", "numpy", "pydantic")
    code = f"import sys, ui.cli.main; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=child_env(), capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_version_is_printed_without_a_command(capsys):
    # "paperchat --version" said "the following arguments are required: COMMAND".
    from ui.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and re.fullmatch(r"paperchat \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)
