"""A blocking WebSocket client connection driven in the caller's thread (no event loop, no reader thread).

:class:`BlockingWebSocket` runs the ``websockets`` package's sans-I/O protocol (``ClientProtocol``:
the handshake, framing, masking, ping answers, the closing handshake) over a plain blocking socket:
``send`` writes the frame from the calling thread and ``recv`` reads the socket in the calling thread,
so a request/answer round trip wakes no other thread. OpenEnv's ``SyncEnvClient`` hands each call to an
event loop in a background thread and waits for it (two thread wake-ups per request), and
``websockets.sync`` reads in a background thread (one); on a busy machine each wake-up waits for the
scheduler (``benchmarks/serve.py``). No compression is offered (``forecast-dojo serve`` declines it).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections import deque
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from forecast_dojo.errors import TransportError, TransportTimeoutError

READ_CHUNK = 256 * 1024


class BlockingWebSocket:
    """One client WebSocket connection; ``send``/``recv``/``close`` block the calling thread only.

    Not thread-safe: one thread at a time (the caller serializes).

    Args:
        url: ``ws://host:port/path`` (or ``wss://``).
        open_timeout_s: Seconds for the TCP connection and the handshake.
        max_size: The largest message accepted, in bytes (None: no limit).

    Raises:
        TransportError: The connection or the handshake failed.
        TransportTimeoutError: The handshake did not finish in time.
    """

    def __init__(self, url: str, *, open_timeout_s: float = 10.0, max_size: int | None = 2**20) -> None:
        uri = parse_uri(url)
        self.url = url
        self._protocol = ClientProtocol(uri, max_size=max_size)
        self._events: deque[Any] = deque()
        self._fragments: list[bytes] = []
        self._text = True
        self._eof = False
        try:
            sock = socket.create_connection((uri.host, uri.port), timeout=open_timeout_s)
        except OSError as err:
            raise TransportError(f"cannot connect to {url}: {err}") from err
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small frames go out at once
        if uri.secure:
            import ssl

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=uri.host)
        self._sock: socket.socket = sock
        try:
            self._protocol.send_request(self._protocol.connect())
            self._flush()
            deadline = time.monotonic() + open_timeout_s
            while not isinstance(self._next_event(deadline), Response):
                pass
            if self._protocol.handshake_exc is not None:
                raise TransportError(f"the handshake with {url} failed: {self._protocol.handshake_exc}")
        except BaseException:
            sock.close()
            raise

    def send(self, text: str) -> None:
        """Send one text message.

        Raises:
            TransportError: The connection is closed (or closing).
        """
        try:
            self._protocol.send_text(text.encode("utf-8", "surrogatepass"))
        except Exception as err:  # websockets' InvalidState: the connection is closing or closed
            raise TransportError(f"{self.url}: the connection is closed ({err})") from err
        self._flush()

    def recv(self, timeout_s: float | None = None) -> str | bytes:
        """The next message (``str`` for text, ``bytes`` for binary); pings are answered on the way.

        Raises:
            TransportTimeoutError: No whole message within ``timeout_s``.
            TransportError: The server closed the connection (a message it sent before is still returned first).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            event = self._next_event(deadline)
            if not isinstance(event, Frame):
                continue
            if event.opcode in (Opcode.TEXT, Opcode.BINARY):
                self._fragments, self._text = [bytes(event.data)], event.opcode is Opcode.TEXT
            elif event.opcode is Opcode.CONT:
                self._fragments.append(bytes(event.data))
            elif event.opcode is Opcode.CLOSE:
                self._flush()  # the protocol's close reply
                raise TransportError(f"{self.url}: the server closed the connection")
            else:  # PING (the protocol queued the PONG) or PONG
                continue
            if event.fin:
                data, self._fragments = b"".join(self._fragments), []
                return data.decode("utf-8", "surrogatepass") if self._text else data

    def close(self, timeout_s: float = 2.0) -> None:
        """The closing handshake (best effort within ``timeout_s``), then the socket is closed."""
        try:
            if not self._eof:
                with contextlib.suppress(Exception):  # already closing or closed
                    self._protocol.send_close(1000)
                    self._flush()
                deadline = time.monotonic() + timeout_s
                while True:  # read until the server closes the TCP connection
                    self._next_event(deadline)
        except (OSError, TimeoutError):
            pass
        finally:
            self._sock.close()

    def _flush(self) -> None:
        for data in self._protocol.data_to_send():
            if data:
                self._sock.sendall(data)
            else:  # the protocol's end of stream: half-close
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_WR)

    def _next_event(self, deadline: float | None) -> Any:
        while not self._events:
            if self._eof:
                reason = self._protocol.parser_exc or "connection closed"
                raise TransportError(f"{self.url}: {reason}")
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TransportTimeoutError(f"{self.url}: no answer in time")
                self._sock.settimeout(remaining)
            else:
                self._sock.settimeout(None)
            try:
                data = self._sock.recv(READ_CHUNK)
            except TimeoutError:
                raise
            except OSError as err:  # reset by the peer
                self._eof = True
                raise TransportError(f"{self.url}: {err}") from err
            if data:
                self._protocol.receive_data(data)
            else:
                self._eof = True
                self._protocol.receive_eof()
            try:
                self._flush()  # pongs, the close reply
            except OSError:
                self._eof = True
            self._events.extend(self._protocol.events_received())
        return self._events.popleft()
