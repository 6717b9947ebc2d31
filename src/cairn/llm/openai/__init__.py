"""The OpenAI chat-completions wire: provider, stream parsing and request format.

``format`` and ``stream`` know the wire shapes and nothing about HTTP; ``provider`` sends and
retries. The scripted test doubles in :mod:`cairn.testing` reuse the first two.
"""

from cairn.llm.openai.format import build_request_body, to_openai_messages
from cairn.llm.openai.provider import OpenAIProvider

__all__ = ["OpenAIProvider", "build_request_body", "to_openai_messages"]
