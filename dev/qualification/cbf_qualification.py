"""pytest plugin: katgpucbf's qualification suite against cbf-controller on
a machine that is not a MeerKAT correlator.

Loaded with `-p cbf_qualification` (this folder on PYTHONPATH) beside the
suite's own conftest.py, which it does not change. It adds two things a
laptop, a CI machine or a GPU machine without the site around it lacks:

- slower bands: for every band the suite knows (katgpucbf.meerkat.BANDS:
  l, u, s0 ...) a band `KEY_slow` with the same digital picture at 1/R the
  rate (sample rate and centre frequency both divided by R, the ini option
  `cbf_slow_factor`, default 1024), so the engines run it in real time
  where L-band's 1712 Msample/s per input cannot be. Every figure the tests
  derive from the band (channel width, tone frequencies, narrowband centre)
  follows, and timestamps are still in ADC samples. `bands = l_slow` in the
  ini picks it.
- a stand-in for the site's Prometheus: the suite asks Prometheus for each
  engine host's hardware (qualification/host_config.py) and a failed query
  fails the whole configuration. With `cbf_prometheus_standin = true` and a
  loopback `prometheus_url`, this plugin answers Prometheus's query API
  there (`/api/v1/query`) with no series: the report then has no host
  details, which is true of a machine with no node exporter.

In a slow band the beam receiver's window is kept to the same span of
time as in the band it slows. The suite's receiver (qualification/recv.py)
holds about 1 GiB of beam chunks "for resynchronising the B-engines", a
window of data sized for L-band's rate; LOSSY eviction hands a chunk over
only when the window has moved past it, so at 1/R the rate the same 1 GiB
would take R times as long to pass (160 s at R = 1024, 4 beams), past
every test's 10 s timeout. The plugin passes the receiver's own window
divisor (the narrowband decimation factor, the one figure it divides the
window by) times R for a slow band: the window is then the L-band
window's time, so B-engines as far out of step as the suite allows at
L-band are still put together, and a chunk is handed over as soon after
it ends as at L-band.
"""

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def pytest_addoption(parser):  # noqa: D103
    parser.addini("cbf_slow_factor", "Divide each band's sample rate and centre by this for the KEY_slow bands",
                  type="string", default="1024")
    parser.addini("cbf_prometheus_standin", "Answer Prometheus's query API at prometheus_url (loopback) with no data",
                  type="bool", default=False)


class _EmptyPrometheus(BaseHTTPRequestHandler):
    """Prometheus's HTTP API, as much of it as PrometheusConnect.custom_query
    uses: every instant query has an empty vector as its answer."""

    def do_GET(self):  # noqa: N802, D102
        path = urllib.parse.urlparse(self.path).path
        if path in ("/api/v1/query", "/api/v1/query_range"):
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        else:
            body = b"404 page not found\n"
            self.send_response(404)
            self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815  (custom_query may POST)

    def log_message(self, *args):  # noqa: D102
        pass


# The slow-band factor of the band whose CBF is being set up (None: not a
# slow band), set before each test; the suite makes its beam receiver when
# the first test of a CBF configuration sets that CBF up.
_window_factor = [None]


def _slow_window(create):
    def create_slow(*args, decimation_factor, **kwargs):
        factor = _window_factor[0]
        if factor is not None:
            decimation_factor = decimation_factor * factor
        return create(*args, decimation_factor=decimation_factor, **kwargs)

    return create_slow


def _add_slow_bands(factor):
    from katgpucbf.meerkat import BANDS, Band

    for key, band in list(BANDS.items()):
        if not key.endswith("_slow"):
            BANDS[f"{key}_slow"] = Band(f"{band.long_name}/{factor:g} (cbf)",
                                        adc_sample_rate=band.adc_sample_rate / factor,
                                        centre_frequency=band.centre_frequency / factor)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):  # noqa: D103
    factor = float(config.getini("cbf_slow_factor"))
    if factor <= 0:
        raise pytest.UsageError(f"cbf_slow_factor: {factor} is not positive")
    # The suite's conftest imported the same dict; adding to it is seen
    # when its pytest_generate_tests reads BANDS[band].
    _add_slow_bands(factor)
    from qualification import recv

    # TiedArrayChannelisedVoltageReceiver calls this module-level name, with
    # decimation_factor as a keyword; it only divides max_chunks there.
    recv.create_tied_array_channelised_voltage_receive_stream_group = _slow_window(
        recv.create_tied_array_channelised_voltage_receive_stream_group)
    config._cbf_slow_factor = factor
    if config.getini("cbf_prometheus_standin"):
        url = urllib.parse.urlparse(config.getini("prometheus_url"))
        if url.hostname not in ("127.0.0.1", "localhost", "::1") or url.port is None:
            raise pytest.UsageError(f"cbf_prometheus_standin: prometheus_url {url.geturl()!r} is not a loopback "
                                    "address with a port")
        server = ThreadingHTTPServer((url.hostname, url.port), _EmptyPrometheus)
        thread = threading.Thread(target=server.serve_forever, name="prometheus-standin", daemon=True)
        thread.start()
        config._cbf_prometheus = (server, thread)


def pytest_runtest_setup(item):  # noqa: D103
    callspec = getattr(item, "callspec", None)
    band = callspec.params.get("band") if callspec is not None else None
    slow = isinstance(band, str) and band.endswith("_slow")
    _window_factor[0] = item.config._cbf_slow_factor if slow else None


def pytest_unconfigure(config):  # noqa: D103
    standin = getattr(config, "_cbf_prometheus", None)
    if standin is not None:
        standin[0].shutdown()
        standin[0].server_close()
        standin[1].join()
