"""Predict-then-check for the lessons: the learner guesses first, the check says why.

A lesson asks a question, the learner writes `prediction = None` -> their guess, and the check
cell calls `check(prediction, answer, why)`. Until a guess is made it only says "predict first";
after a guess it says right or wrong and why, and shows the answer. The answer is always computed
by the library in the lesson, never typed into the question.
"""

from __future__ import annotations

import math

PREDICT_FIRST = "predict first: replace None with your guess, then run this cell again"


def _close(guess, answer, rel: float) -> bool:
    if isinstance(answer, bool) or isinstance(guess, bool):
        return type(guess) is type(answer) and guess == answer
    if isinstance(answer, (int, float)) and isinstance(guess, (int, float)):
        return math.isclose(float(guess), float(answer), rel_tol=rel, abs_tol=rel)
    if isinstance(answer, (tuple, list)) and isinstance(guess, (tuple, list)):
        return len(guess) == len(answer) and all(
            _close(g, a, rel) for g, a in zip(guess, answer, strict=True)
        )
    return guess == answer


def verdict(prediction, answer, why: str = "", rel: float = 1e-6) -> str:
    """The text `check` prints: 'predict first', or right/wrong, the answer and why."""
    if prediction is None:
        return PREDICT_FIRST
    head = "right" if _close(prediction, answer, rel) else f"not quite: you said {prediction!r}"
    text = f"{head}; the answer is {answer!r}"
    return f"{text}. {why}" if why else text


def check(prediction, answer, why: str = "", rel: float = 1e-6) -> bool | None:
    """Print the verdict; return None before a guess, else whether the guess was right."""
    print(verdict(prediction, answer, why, rel))
    return None if prediction is None else _close(prediction, answer, rel)
