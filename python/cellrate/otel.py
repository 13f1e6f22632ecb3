"""OpenTelemetry metrics of cellrate's limits (`pip install '.[otel]'`).

    import cellrate.otel
    cellrate.otel.register(limiter, name="api")

register() puts a limiter, a keyed limiter, a concurrency limit or a web
policy (or the middleware, interceptor, dependency or decorator holding one)
under `name` with an OpenTelemetry MeterProvider (default: the global one).
Nothing is counted here: the instruments are observable, and each collection
reads the counters the core keeps (`stats()`), the same counters and the same
list of metrics (the core's, docs/design.md §17) as cellrate.prometheus, so a
limit in a shared region reports the totals of every process of the host.

Only the OpenTelemetry API is imported; the SDK (or any other
implementation) is the application's. docs/operations.md#opentelemetry.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any, Iterator

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

import cellrate
from cellrate._errors import invalid_type
from cellrate._metrics import METRICS, Registered, checked_name, series, sources

__all__ = ["register", "unregister"]

# The instrument that observes each kind of metric the core lists
_INSTRUMENTS = {
    "counter": "create_observable_counter",
    "updowncounter": "create_observable_up_down_counter",
    "gauge": "create_observable_gauge",
}


class _Instruments:
    """The observable instruments of one MeterProvider, made once, and the
    limits registered with it."""

    def __init__(self, provider: MeterProvider) -> None:
        self.registered = Registered("meter provider")
        meter = provider.get_meter("cellrate", cellrate.__version__)
        for metric in METRICS:
            create = getattr(meter, _INSTRUMENTS[metric["instrument"]])
            create(metric["name"], callbacks=[functools.partial(self._observe, metric)],
                   unit=metric["unit"], description=metric["help"])

    def _observe(self, metric: dict[str, Any], options: CallbackOptions) -> Iterator[Observation]:
        read = self.registered.read(metric["stats"] == "concurrency")
        by, label = metric["by"], metric["label"]
        for one in series(metric, read):
            attributes = {attribute: one.source.labels[name]
                          for name, attribute in metric["labels"] if name in one.source.labels}
            if by:
                attributes[by[1]] = one.by or ""
            if label:
                attributes[label[1]] = one.value or ""
            yield Observation(one.count, attributes)


_INSTRUMENTS_OF: weakref.WeakKeyDictionary[MeterProvider, _Instruments] = (
    weakref.WeakKeyDictionary())
_INSTRUMENTS_LOCK = threading.Lock()


def _instruments(meter_provider: MeterProvider | None) -> _Instruments:
    provider = otel_metrics.get_meter_provider() if meter_provider is None else meter_provider
    if not isinstance(provider, MeterProvider):
        raise invalid_type("meter_provider", "meter_provider must be an OpenTelemetry "
                           "MeterProvider (or None: the global one), not "
                           f"{type(provider).__name__}")
    with _INSTRUMENTS_LOCK:
        instruments = _INSTRUMENTS_OF.get(provider)
        if instruments is None:
            instruments = _INSTRUMENTS_OF[provider] = _Instruments(provider)
        return instruments


def register(limiter: Any, *, name: str, meter_provider: MeterProvider | None = None) -> None:
    """Exports `limiter`'s counters under the attribute cellrate.limit.name=`name`.

    limiter: a Limiter, KeyedLimiter or Concurrency (in process or shared=), or a
        cellrate.web.Policy or anything holding one as `.policy` (the ASGI and
        WSGI middleware, the gRPC interceptors, cellrate.fastapi.RateLimit, ...),
        whose limits carry the policy's name and route pattern too.
    name: the limit's name; one name once per meter provider.
    meter_provider: an OpenTelemetry MeterProvider; None: the global one.
    """
    name = checked_name(name)
    found = sources(limiter, name)
    _instruments(meter_provider).registered.add(name, found)


def unregister(name: str, *, meter_provider: MeterProvider | None = None) -> None:
    """Stops exporting what was registered under `name` (the instruments stay,
    observing what else is registered)."""
    _instruments(meter_provider).registered.remove(checked_name(name))
