"""warren-agent/0 on the wire: models, the one converter, verdict logic and the strict JSON reader.

This package is pure (no trio, no I/O, no clock) so the server, the client SDK and tests share one definition
of what goes over the wire. Submodules are imported explicitly (``from warren_sim.protocol.models import
Receipt``); this module only holds the protocol's fixed names.
"""

#: The protocol this package implements, as sent in the version header and accepted as ``protocol=``.
PROTOCOL_VERSION = "warren-agent/0"
#: Header carried by every /v1 response; a request that sends it with another value gets 409.
PROTOCOL_HEADER = "X-Warren-Protocol"
#: Media type of every error body (RFC 9457).
PROBLEM_CONTENT_TYPE = "application/problem+json"

__all__ = ["PROBLEM_CONTENT_TYPE", "PROTOCOL_HEADER", "PROTOCOL_VERSION", "case_hint"]


def case_hint(sent: str) -> str:
    """What a refusal of a sent protocol version adds when only its case differs.

    Versions are compared exactly, case included (the header after trimming spaces), in the header, in ``protocol=`` and
    on the WebSocket handshake (docs/decisions.md): ``warren-agent/0`` is a token like a WebSocket subprotocol
    name (RFC 6455 compares those case-sensitively), and one rule everywhere beats a lenient one here and there.
    """
    if sent.strip().lower() == PROTOCOL_VERSION and sent.strip() != PROTOCOL_VERSION:
        return " (compared exactly, case included)"  # short: a WebSocket close reason holds 123 bytes
    return ""
