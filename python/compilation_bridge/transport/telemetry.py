"""`StreamTelemetry`: Snakepit's controls in, the worker's telemetry events out (docs/wire.md, Telemetry).

The server is synchronous gRPC, one thread per open stream. The controls arrive on the request stream,
which only a blocking read can follow, so a helper thread of the stream reads them while the stream's
own thread sends events, a batch at a time (`TelemetryStream.take_batch`). A call that ends (the client
went away, or its deadline passed, as it does for Snakepit 0.13 five seconds after opening) wakes the
stream, which returns at once; the events it took but could not send go back to the queue for the next
stream.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

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
                if not context.is_active():
                    stream.put_back(batch[sent:])
                    return
                yield message_of(event)


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


def message_of(event: TelemetryEvent) -> pb.TelemetryEvent:
    """The wire form, as Snakepit's Python side builds it: a bool measurement is an integer, an int an
    `int_value`, a float a `float_value`, anything else its `str` as `string_value`."""
    message = pb.TelemetryEvent(
        event_parts=event.name.split("."),
        metadata=event.metadata,
        timestamp_ns=event.timestamp_ns,
        correlation_id=event.correlation_id,
    )
    for key, value in event.measurements.items():
        field = message.measurements[key]
        if isinstance(value, bool | int):
            field.int_value = int(value)
        elif isinstance(value, float):
            field.float_value = value
        else:
            field.string_value = str(value)
    return message
