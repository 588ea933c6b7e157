"""The one writer of generated files: renders a template, writes only what changed, and in
``--check`` mode reports stale files instead of writing (torchgen's ``FileManager`` pattern)."""

from __future__ import annotations

from pathlib import Path

import jinja2


class FileManager:
    def __init__(self, template_dir: Path, out_dir: Path, check: bool, sources: str):
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(template_dir)),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        self.out_dir = out_dir
        self.check = check
        self.sources = sources
        self.stale: list[Path] = []
        self.written: list[Path] = []
        self.expected: set[str] = set()

    def render(self, template: str, filename: str, **context) -> None:
        text = self.env.get_template(template).render(sources=self.sources, **context)
        path = self.out_dir / filename
        self.expected.add(filename)
        old = path.read_text() if path.exists() else None
        if old == text:
            return
        if self.check:
            self.stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            self.written.append(path)

    def leftovers(self) -> list[Path]:
        """Generated files that no template produces any more."""
        return sorted(p for p in self.out_dir.glob("*") if p.is_file() and p.name not in self.expected)
