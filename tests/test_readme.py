"""The README's claims stay true.

Its two set-up commands are the first lines of code and CI runs the second verbatim; its
first screen says what disembed does, shows a quickstart that runs and the main table with
what its numbers mean; it carries no provenance (commit hashes, dates, load figures: those
live in the page each figure links to, and the table there is the README's to the digit);
every relative link resolves; docs/index.md lists every page.
"""

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

SETUP = [
    'python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e ".[plot]" && '
    ".venv/bin/disembed data download && .venv/bin/disembed bench",
    'python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e ".[dev]" && '
    ".venv/bin/python -m pytest",
]
FIRST_SCREEN_END = "## How it works"
QUICKSTART_MAX_LINES = 15


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _setup_commands():
    block = _text().split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def _first_screen() -> str:
    text = _text()
    assert FIRST_SCREEN_END in text, f"the README lost its {FIRST_SCREEN_END!r} heading"
    return text.split(FIRST_SCREEN_END, 1)[0]


def _example(text: str, name: str) -> str:
    """The fenced block right after ``<!-- example: NAME -->``."""
    marker = f"<!-- example: {name} -->"
    assert marker in text, f"no {marker} in the README"
    return text.split(marker, 1)[1].split("```", 2)[1].split("\n", 1)[1]


def _table(text: str, header_start: str = "| method | Tatoeba-14 | untagged") -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line.strip())
    return rows


def test_readme_opens_with_two_setup_commands():
    commands = _setup_commands()
    assert commands == SETUP  # exactly as they were: the first two lines of code
    first_code = _text().index("```")
    assert _text()[first_code:].startswith("```bash\n" + SETUP[0])


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = _setup_commands()[1].replace("pip install ", "pip install -q ")
    assert test_command in ci


def test_first_screen_says_what_and_for_whom_then_setup_quickstart_table_links():
    screen = _first_screen()
    intro = screen.split("```", 1)[0]
    assert "meaning" in intro and "language" in intro and "It is for " in intro
    order = [screen.index(x) for x in (
        "```bash\n" + SETUP[0], "## Quickstart", "| method | Tatoeba-14",
        "Scores x100", "docs/results.md", "docs/index.md")]
    assert order == sorted(order), "the first screen's parts are out of order"
    # the paragraph under the table says what every column means
    after_table = screen.split("Scores x100", 1)[1]
    for column in ("**Tatoeba-14**", "**STS17 cross**", "**WMT20 QE (6)**", "**untagged**",
                   "**language part, Tatoeba**"):
        assert column in after_table, f"the table's paragraph does not explain {column}"


def test_quickstart_is_at_most_15_lines_and_covers_train_meaning_score_mine():
    screen = _first_screen()
    code = _example(screen, "quickstart") + _example(screen, "quickstart-cli")
    lines = [line for line in code.splitlines() if line.strip()]
    assert len(lines) <= QUICKSTART_MAX_LINES, len(lines)
    assert "fit_method(" in code and ".meaning(" in code
    assert "disembed score" in code and "disembed mine" in code


# a commit hash: 7-40 hex digits holding at least one digit and one letter
_HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
_PROVENANCE = [
    _HASH,
    re.compile(r"\bload (average )?\d"),                      # load figures
    re.compile(r"\b\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b"),  # dates
    re.compile(r"\b\d\d:\d\d UTC\b"),
]


@pytest.mark.parametrize("pattern", _PROVENANCE, ids=["hash", "load", "date", "time"])
def test_readme_carries_no_provenance(pattern):
    found = pattern.findall(_text())
    assert not found, (f"the README holds provenance ({found[:3]}); move it to the docs page "
                       "the figure links to (docs/results.md for the main table)")


def test_provenance_check_catches_a_hash():
    assert _HASH.search("a clean clone at 018d99f on")
    assert not _HASH.search("e5-small use-m3 sha256 deadbeef 2000000")


def test_readme_table_is_the_one_its_provenance_page_holds():
    readme_rows = _table(_first_screen())
    assert len(readme_rows) == 5  # header, rule, baseline, mean-centering, seed-centered
    results = (DOCS / "results.md").read_text(encoding="utf-8")
    section = results.split("## The README table", 1)[1]
    assert _table(section) == readme_rows, ("the README's table and docs/results.md's "
                                            "'The README table' differ: change both")


def test_quickstart_runs(tmp_path, monkeypatch, full_data_dir, capsys):
    """The Python quickstart as written, with the hash encoder for e5-small and the tiny
    data: it trains, saves and prints a 3 x 3 matrix of cosines."""
    import disembed

    real = disembed.load_encoder
    monkeypatch.setattr(disembed, "load_encoder", lambda spec: real("hash:16"))
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.chdir(tmp_path)
    exec(compile(_example(_first_screen(), "quickstart"), "README quickstart", "exec"), {})
    assert (tmp_path / "models" / "quick" / "config.json").is_file()
    printed = capsys.readouterr().out
    numbers = [float(x) for x in re.findall(r"-?\d+\.\d*(?:e[-+]?\d+)?", printed)]  # "1." too
    assert len(numbers) == 9 and all(abs(numbers[i] - 1) < 1e-5 for i in (0, 4, 8))

    # then the command-line lines, on the model just saved (it records its encoder)
    from disembed.cli import main

    (tmp_path / "pairs.tsv").write_text("src\ttgt\nGuten Morgen.\tGood morning.\n"
                                        "Danke.\tThank you.\n", encoding="utf-8")
    (tmp_path / "de.txt").write_text("Guten Morgen.\nDanke.\nJa.\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("Good morning.\nThank you.\nYes.\n", encoding="utf-8")
    for line in _example(_first_screen(), "quickstart-cli").splitlines():
        words = shlex.split(line.split("#", 1)[0])
        assert words[0] == "disembed"
        assert main(words[1:]) == 0, line
    assert (tmp_path / "scored.tsv").is_file() and (tmp_path / "mined.tsv").is_file()
    assert (tmp_path / "kept.tsv.scores.tsv").is_file()


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation out, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


def _pages():
    return [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_relative_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_link_check_catches_a_wrong_anchor(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# The README table\n")
    assert "the-readme-table" in _anchors(page)
    assert _slug("At the default job's protocol: 500 pairs, 3 seeds") == \
        "at-the-default-jobs-protocol-500-pairs-3-seeds"


def test_docs_index_lists_every_page_once_with_a_line():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\* \[([\w.-]+\.md)\]\(\1\): \S", index, flags=re.M)
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "index.md")
    assert sorted(listed) == pages, (f"docs/index.md lists {sorted(listed)}; docs/ holds "
                                     f"{pages}: add a line for each new page")
    assert "docs/index.md" in _first_screen()


def test_docs_titles_name_what_the_page_is_not_its_history():
    for page in DOCS.glob("*.md"):
        title = page.read_text(encoding="utf-8").splitlines()[0]
        assert not re.search(r"\bissues? \d", title), f"{page.name}: {title}"


def test_every_command_in_the_readme_parses():
    """Flags and arity of every ``disembed ...`` line (a renamed flag fails here)."""
    import argparse

    from disembed.cli import build_parser

    def untyped(parser):
        for action in parser._actions:
            action.type = None
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    untyped(child)

    parser = build_parser()
    untyped(parser)
    blocks = re.findall(r"```bash\n(.*?)```", _text(), flags=re.S)
    lines = [line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    commands = [line for line in lines if line.startswith("disembed ") and "..." not in line]
    assert len(commands) >= 10
    for command in commands:
        parser.parse_args(shlex.split(command)[1:])
