"""The worked recipe and encoder of CONTRIBUTING.md, executed from the document itself."""

from __future__ import annotations

from contributing import example

Shift = example("recipe")["Shift"]
ConstantEncoder = example("encoder")["ConstantEncoder"]
