"""The Shakespeare corpus shipped with the package (assets/shakespeare.txt.xz, read offline).

The 42 plays and poems of the Project Gutenberg editions, public domain: 5,055,571 ASCII
characters, 84 distinct (origin and checksum: assets/SOURCES.md). The `shakespeare` task trains
on its first 1,115,394 characters (the size of nanoGPT's Shakespeare corpus), or all of it.
"""

import lzma
import math
from importlib import resources

SLICE = 1_115_394  # characters of the default slice: as many as nanoGPT's shakespeare_char
FULL = 5_055_571  # characters of the whole corpus
ASSET = "assets/shakespeare.txt.xz"


def corpus(full=False):
    """The corpus as a str: its first SLICE characters, or with full=True all FULL of them."""
    raw = lzma.decompress(resources.files("tinyattn").joinpath(ASSET).read_bytes())
    text = raw.decode("ascii")
    return text if full else text[:SLICE]


def bits_per_char(loss):
    """Cross-entropy in nats per character -> bits per character."""
    return loss / math.log(2)
