"""The engine works without the UI: engine packages import neither textual nor rich."""

import subprocess
import sys

ENGINE_MODULES = ["fsscope.targets", "fsscope.recipes", "fsscope.store", "fsscope.engine.runner",
                  "fsscope.engine.child", "fsscope.engine.context", "fsscope.analysis", "fsscope.tools"]


def test_engine_imports_no_ui_libraries():
    code = "\n".join(f"import {m}" for m in ENGINE_MODULES) + (
        "\nimport sys\nprint(','.join(m for m in ('textual', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"engine pulled in: {out.stdout.strip()}"
