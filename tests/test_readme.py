"""The README's two set-up commands stay true: CI runs the second one verbatim."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_two_setup_commands():
    commands = _setup_commands()
    assert len(commands) == 2
    assert commands[0].endswith("disembed bench")
    assert all("torch==2.13.0" in c for c in commands)


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = _setup_commands()[1].replace("pip install ", "pip install -q ")
    assert test_command in ci
