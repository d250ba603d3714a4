"""docs/performance.md sections written by the benchmark scripts (scripts/perf_doc.py)."""

import pytest

import perf_doc


def test_a_section_is_replaced_and_the_hand_written_text_kept():
    text = ("# Performance\nintro\n<!-- begin core -->\nold numbers\n<!-- end core -->\n"
            "findings\n<!-- begin bake -->\nbake numbers\n<!-- end bake -->\n")
    new = perf_doc.replace_section(text, "core", "new numbers")
    assert "old numbers" not in new and "new numbers" in new
    assert new.startswith("# Performance\nintro\n<!-- begin core -->\nnew numbers\n")
    assert new.endswith("<!-- end core -->\nfindings\n<!-- begin bake -->\nbake numbers\n"
                        "<!-- end bake -->\n")
    assert perf_doc.replace_section(new, "core", "new numbers") == new


def test_a_missing_section_is_appended_and_a_broken_one_refused():
    new = perf_doc.replace_section("# Performance\n", "core", "numbers")
    assert new == "# Performance\n\n<!-- begin core -->\nnumbers\n<!-- end core -->\n"
    with pytest.raises(ValueError, match="no matching"):
        perf_doc.replace_section("<!-- begin core -->\nnumbers\n", "core", "x")


def test_record_section_heads_the_numbers_with_the_command(tmp_path):
    path = tmp_path / "performance.md"
    perf_doc.record_section("core", ["| a | b |"], path=path,
                            argv=["/x/bench_core.py", "--quick"])
    text = path.read_text()
    assert "Written by `bench_core.py --quick` on " in text
    assert text.index("<!-- begin core -->") < text.index("| a | b |") < text.index(
        "<!-- end core -->")
