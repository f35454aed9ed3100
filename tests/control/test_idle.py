"""Requests reach nodes that are waiting for input: an F-engine fed by a
receiver that gets no packets has every node blocked in cbf_port_recv; a
gain, a delay model and a capture request must still be carried out (the
mailbox wakes the wait; without that they would be refused after 5 s).
Also: a second engine on the same control endpoint fails to start, naming
engine.control, and the first drains to exit 0 on shutdown."""
import os
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import CBF_RUN, Engine, check  # noqa: E402

YAML = """
engine:
  gpu: none
  control: %s
nodes:
  recv:
    plugin: receiver
    params: {address: "127.0.0.1:%d", antennas: 1, bits: 10, samples_per_chunk: 65536}
  pfb:
    plugin: pfb
    params: {channels: 256, taps: 16, spectra_per_buffer: 64}
  post:
    plugin: fft_post
    params: {spectra_per_heap: 64}
  sink:
    plugin: filesink
    params: {path: %s, overwrite: true}
edges:
  - recv.out -> pfb.in
  - pfb.out -> post.in
  - post.out -> sink.in
"""


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-idle-")
    text = YAML % ('"tcp://127.0.0.1:*"', free_udp_port(), os.path.join(tmp, "out.h5"))
    e = Engine(text, os.path.join(tmp, "idle.yaml"))
    try:
        for args, want in ((["gain", "0.5"], "pending: 1"),
                           (["delays", "1e-9", "0", "0", "0"], "coarse_delay: 2"),
                           (["capture", "stop"], "capture: stopped")):
            rc, out, err = e.ctl(*args)
            check(rc == 0 and want in out, "%s taken by a node waiting for input (%s)" %
                  (" ".join(args), (out + err).strip().replace("\n", ", ")))
        rc, out, err = e.ctl("--json", "sensors")
        check(rc == 0 and '"buffers_in":0' in out, "no buffer has arrived")

        # The same endpoint again: the second engine refuses to start.
        text2 = YAML % ('"%s"' % e.control, free_udp_port(), os.path.join(tmp, "out2.h5"))
        with open(os.path.join(tmp, "second.yaml"), "w") as f:
            f.write(text2)
        r = subprocess.run([CBF_RUN, os.path.join(tmp, "second.yaml"), "--quiet"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and "engine.control: cannot bind" in r.stderr,
              "a second engine on %s: exit %d, %s" % (e.control, r.returncode, r.stderr.strip()))
        check(e.running(), "the first engine runs on")
        check(e.shutdown() == 0, "exit 0 after shutdown, with nothing received")
    finally:
        e.kill()


if __name__ == "__main__":
    main()
