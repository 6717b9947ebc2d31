"""Compression in a session: what the model gets afterwards, live and after a resume.

Real Session and Runtime over the in-process scripted model; what is observed is the requests
the model received and the recording a resume reads back.
"""

from __future__ import annotations

import pytest

from cairn.testing import reply

from .helpers import MakeWorld

pytestmark = pytest.mark.timeout(60)

SUMMARY = "<state_snapshot>SUMMARY-OF-EARLIER-WORK</state_snapshot>"


async def test_a_resume_starts_from_the_last_compression(make_world: MakeWorld) -> None:
    """Regression: a compression was never written to the recording, so --continue replayed the
    whole uncompressed history to the model although docs/usage.md says a resume starts from the
    last compression."""
    world = make_world()
    world.provider.enqueue(
        reply(SUMMARY, usage={"prompt_tokens": 1500, "completion_tokens": 20}), purpose="compress"
    )
    world.provider.enqueue(*(reply(f"EARLY-ANSWER-{i}") for i in range(4)), purpose="main")
    session = world.session()
    for i in range(4):
        await world.prompt(session, f"EARLY-QUESTION-{i}: " + "words " * 50)
    await world.prompt(session, "/compress")
    await world.prompt(session, "LATER-QUESTION")
    await session.close()

    resumed = world.load(session.id)
    await world.prompt(resumed, "AFTER-RESUME")

    sent = "\n".join(c.text for c in world.last_main().contents)
    assert "SUMMARY-OF-EARLIER-WORK" in sent
    assert "LATER-QUESTION" in sent
    assert "AFTER-RESUME" in sent
    assert "EARLY-ANSWER-0" not in sent  # summarised away, as it was before the resume
    assert "EARLY-QUESTION-0: words" in sent  # the user's words stay, word for word
