"""The README's generated parts are current."""

from pathlib import Path

from s2sad.rules import catalog

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_rule_table_is_generated_from_the_registry():
    text = README.read_text(encoding="utf-8")
    table = text[text.index(catalog.START):text.index(catalog.END) + len(catalog.END)]
    assert table == catalog.markdown(), "stale: run `.venv/bin/python -m s2sad rules --update-readme README.md`"
