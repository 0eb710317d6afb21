"""Big blocks mapped on their own are given back to the system when freed (glibc)."""

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import sys
    from siamese.runtime.memory import map_big_blocks

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    if sys.argv[1] == "map":
        assert map_big_blocks()
    # blocks of varied sizes (as activations of texts of varied lengths), each touched, a small one
    # kept after each: a heap cannot give back what lies under a block still in use
    keep, before = [], rss_mb()
    for i in range(40):
        big = bytearray((2 + i % 5) << 20)
        keep.append(bytearray(1000))
        del big
    blocks = [bytearray((2 + i % 5) << 20) for i in range(40)]
    keep += [bytearray(1000) for _ in range(40)]
    del blocks
    print(round(rss_mb() - before))
    """
)


def _held_mb(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_big_blocks_go_back_to_the_system():
    assert _held_mb("map") < 20  # ~160 MB were allocated and freed (glibc 2.36 by default keeps ~160 MB)
