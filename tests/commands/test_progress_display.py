"""`compilation-bridge compile` shows progress as a bar redrawn in place on a terminal and as plain lines
anywhere else, with the same events a streamed compile_model sends."""

from __future__ import annotations

import io

from compilation_bridge.commands.compile import ProgressBar, ProgressPrinter, progress_display


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _piece(event: str, piece: int, num_pieces: int = 4) -> dict[str, object]:
    return {
        "event": event,
        "piece": piece,
        "num_pieces": num_pieces,
        "range": [1, 8],
        "compiler": "eager",
        "ok": True,
        "seconds": 0.5,
        "source": "compiled",
    }


def test_a_terminal_gets_a_bar_and_anything_else_lines() -> None:
    assert isinstance(progress_display(Terminal()), ProgressBar)
    assert isinstance(progress_display(io.StringIO()), ProgressPrinter)


def test_the_bar_fills_piece_by_piece_on_one_line() -> None:
    out = Terminal()
    bar = ProgressBar(out)
    bar({"event": "trace_start", "num_tokens": 32, "mode": "VLLM_COMPILE"})
    for piece in range(4):
        bar(_piece("compile_start", piece))
        bar(_piece("compile_end", piece))
    bar({"event": "range_compiled", "range": [1, 8], "seconds": 2.0})
    text = out.getvalue()
    assert text.count("\n") == 2  # the two lines; every bar was redrawn in place
    assert "tracing with 32 tokens" in text and "range (1, 8) ready in 2.00 s" in text
    assert "[" + "#" * 12 + "." * 12 + "] 2/4 pieces, range (1, 8)" in text
    assert "[" + "#" * 24 + "] 4/4 pieces" in text
    assert text.rstrip("\n").endswith("range (1, 8) ready in 2.00 s")  # the bar was erased before it


def test_lines_name_each_piece_a_warm_start_and_a_fallback() -> None:
    out = io.StringIO()
    lines = ProgressPrinter(out)
    lines(_piece("compile_end", 1))
    lines({"event": "piece_loaded", "piece": 0, "num_pieces": 2, "ranges": ["1-8"], "bytes": 2048})
    lines({"event": "warm_start_declined", "reason": "bundle made with torch 2.12.0"})
    text = out.getvalue()
    assert "piece 2/4 compiled (eager) in 0.50 s" in text
    assert "piece 1/2 loaded from the bundle (2048 bytes)" in text
    assert "no warm start: bundle made with torch 2.12.0" in text
    assert "\r" not in text
