"""`StreamTelemetry`: Snakepit's controls in, the worker's telemetry events out (docs/wire.md, Telemetry).

The server is synchronous gRPC, one thread per open stream. The controls arrive on the request stream,
which only a blocking read can follow, so a helper thread of the stream reads them while the stream's
own thread sends events, a batch at a time (`TelemetryStream.take_batch`). A call that ends (the client
went away, or its deadline passed, as it does for Snakepit 0.13 five seconds after opening) wakes the
stream, which returns at once; the events it took but could not send go back to the queue for the next
stream.

Every event sent is one gRPC message, and the stream's thread builds each while calls wait for the
interpreter (docs/performance.md, Observers on vs off): a message starts as a copy of a template per
event name and metadata, which a tool's events share call after call, and gets only its own time,
correlation id and measurements set.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping

import grpc

from compilation_bridge.observability.telemetry_controls import TelemetryControls
from compilation_bridge.observability.telemetry_stream import BATCH_S, TelemetryEvent, TelemetryStream
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

log = logging.getLogger("compilation_bridge.transport")


def stream_events(
    stream: TelemetryStream, controls: Iterator[pb.TelemetryControl], context: grpc.ServicerContext
) -> Iterator[pb.TelemetryEvent]:
    """The events of `stream` as messages, until the call ends, while a helper thread applies `controls`."""
    reader = threading.Thread(
        target=_apply_controls, args=(controls, stream.controls), name="telemetry-controls", daemon=True
    )
    reader.start()
    context.add_callback(stream.wake)
    with stream.attached():
        while context.is_active():
            batch = stream.take_batch(BATCH_S)
            for sent, event in enumerate(batch):
                try:
                    yield message_of(event)
                except GeneratorExit:  # gRPC found the call ended, sent no more and let the stream go
                    stream.put_back(batch[sent:])  # whether the last one left is unknown: it goes again
                    raise


def _apply_controls(controls: Iterator[pb.TelemetryControl], into: TelemetryControls) -> None:
    try:
        for control in controls:
            apply_control(control, into)
    except grpc.RpcError:
        pass  # the call ended: the client went away, its deadline passed, or the worker is stopping
    except Exception:  # a control that cannot be read never takes the worker down
        log.warning("telemetry controls: stopped reading", exc_info=True)


def apply_control(control: pb.TelemetryControl, into: TelemetryControls) -> None:
    which = control.WhichOneof("control")
    log.debug("telemetry control: %s", which)
    if which == "toggle":
        into.toggle(control.toggle.enabled)
    elif which == "sampling":
        into.sample(control.sampling.sampling_rate)
    elif which == "filter":
        into.filter(control.filter.allow, control.filter.deny)


MAX_TEMPLATES = 256  # event name and metadata pairs kept (callers choose tool and operation names)
_templates: dict[tuple[str, tuple[tuple[str, str], ...]], pb.TelemetryEvent] = {}


def message_of(event: TelemetryEvent) -> pb.TelemetryEvent:
    """The wire form, as Snakepit's Python side builds it: a bool measurement is an integer, an int an
    `int_value`, a float a `float_value`, anything else its `str` as `string_value`."""
    message = pb.TelemetryEvent()
    message.CopyFrom(_template(event.name, event.metadata))
    message.timestamp_ns = event.timestamp_ns
    message.correlation_id = event.correlation_id
    for key, value in event.measurements.items():
        field = message.measurements[key]
        if isinstance(value, bool | int):
            field.int_value = int(value)
        elif isinstance(value, float):
            field.float_value = value
        else:
            field.string_value = str(value)
    return message


def _template(name: str, metadata: Mapping[str, str]) -> pb.TelemetryEvent:
    """The message's parts that events of one name and metadata share. Only the open streams' threads
    (two at most) ask; each dict operation is atomic, and a template is never changed once made."""
    key = (name, tuple(metadata.items()))
    template = _templates.get(key)
    if template is None:
        if len(_templates) >= MAX_TEMPLATES:
            _templates.clear()  # a flood of distinct names costs what building every message did
        template = _templates[key] = pb.TelemetryEvent(event_parts=name.split("."), metadata=metadata)
    return template
