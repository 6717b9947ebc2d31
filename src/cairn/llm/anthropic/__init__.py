"""The Anthropic Messages wire: provider, stream parsing and request format.

Imported only when the endpoint is an Anthropic one (``security.auth.type: "anthropic"`` or the
``ANTHROPIC_*`` variables), so the OpenAI path never pays for it.
"""

from cairn.llm.anthropic.format import build_request_body, to_anthropic_messages
from cairn.llm.anthropic.provider import AnthropicProvider

__all__ = ["AnthropicProvider", "build_request_body", "to_anthropic_messages"]
