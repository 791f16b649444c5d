"""The lessons pipeline (the Guide's chapter 12, docs/lessons.md): human overrides are
stored as ground truth (`overrides`), grouped by a deterministic clustering
(`cluster`), turned into drafts by a drafter (`draft`), decided on at a named gate
(`gate`), and only then published as versioned, attributable artifacts (`publish`);
a published fixture is re-run over its surface's events by `rerun`."""
