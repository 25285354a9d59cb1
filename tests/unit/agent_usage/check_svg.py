#!/usr/bin/env python3
"""An SVG report chart is well-formed XML, an <svg> in the SVG namespace with a viewBox, and
self-contained: no scripts, images, links, external references or foreign objects.
usage: check_svg.py FILE..."""
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
FORBIDDEN = {"script", "image", "a", "foreignObject", "use", "style"}


def check(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    if root.tag != SVG + "svg":
        raise ValueError(f"{path}: root element is {root.tag}, not svg")
    if "viewBox" not in root.attrib:
        raise ValueError(f"{path}: no viewBox")
    n_rect = 0
    for el in root.iter():
        tag = el.tag.replace(SVG, "")
        if tag in FORBIDDEN:
            raise ValueError(f"{path}: <{tag}> is not allowed")
        for k, v in el.attrib.items():
            if "href" in k or "url(" in v or k.startswith("on"):
                raise ValueError(f"{path}: external reference or handler {k}={v!r}")
        n_rect += tag == "rect"
    if root.find(SVG + "title") is None:
        raise ValueError(f"{path}: no <title>")
    return n_rect


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for path in sys.argv[1:]:
        n = check(path)
        print(f"{path}: well-formed SVG, {n} rects")
    return 0


if __name__ == "__main__":
    sys.exit(main())
