"""The small-request log's files: append-only segments of framed records, and the
position the drain has reached (decision 0010, "Fourth round: the log").

A frame is `length (u32) | crc32 (u32) | payload`, its crc seeded with its segment's
number (the length's top bit says so; frames of builds before it have an unseeded crc
and are read as before). Frames are appended by one writer and made durable by `sync`
(one `fsync` for every frame appended since the last: group fsync); a request is
answered only after the `sync` covering its frame. A segment is cut to its last frame
and closed (fsynced) before the next is opened, so only the last segment can end in a
torn frame: `recover` truncates it there (such a frame was never acknowledged). A bad
frame anywhere else is damage, not a crash, and stops the start.

`drained(position)` records, atomically and durably (a temporary file, fsync, rename,
fsync of the directory), how far the store holds the log, and removes the segments
wholly before it, keeping up to `SPARES` of those this writer wrote as spare files
that the next segments are written over in place: a frame written over a recycled
file's blocks costs the kernel no block allocation at `fdatasync` and none freed at the
drain (~0.65 against 1.3-2.9 ms of CPU, 2.6-4 against 8-10 ms of wall time for a
3.2 MB frame and its fdatasync here; bench/RESULTS.md, "Tenth round"). What a spare
held before is frames of another segment number, which fail the seeded crc: its end is
found as a torn tail's is. Files are owner-only (0600, directory 0700). A build before
this one reads seeded frames as torn: drain the log (a clean stop) before a downgrade.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_HEAD = struct.Struct("<II")
LOG_DIRECTORY = "ingest-log"  # under the chDB directory of the store it feeds
_POSITION = "position"
_SUFFIX = ".seg"
_SPARE = ".spare"
SPARES = 2  # drained segments kept to be written over (16 MiB each by default)
_SEEDED = 1 << 31  # in a frame's length: its crc is seeded with its segment's number
# A frame longer than this is damage (a frame holds one commit: bounded far below it).
MAX_FRAME_BYTES = 1 << 30


class LogDamaged(Exception):
    """A frame that is not the torn tail of the last segment fails its check."""


@dataclass(frozen=True, order=True)
class Position:
    """A place in the log: segment number and byte offset in it."""

    segment: int
    offset: int


def _name(segment: int) -> str:
    return f"{segment:016d}{_SUFFIX}"


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_datasync = getattr(os, "fdatasync", os.fsync)


def _seed(segment: int) -> int:
    return zlib.crc32(segment.to_bytes(8, "little"))


def encode(payload: bytes, segment: int | None = None) -> bytes:
    """A frame of `payload` in segment `segment` (None: unseeded, as builds before
    seeded frames wrote them)."""
    if segment is None:
        return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload
    return _HEAD.pack(len(payload) | _SEEDED, zlib.crc32(payload, _seed(segment))) + payload


def pending(directory: Path) -> bool:
    """Whether the log at `directory` holds frames past its drained position (a
    process was killed before its drain): file sizes only, no frame read, so that an
    opener of the store that finds nothing to replay pays a few `stat`s."""
    if not directory.is_dir():
        return False
    try:
        segment, offset = (int(v) for v in (directory / _POSITION).read_text().split())
    except FileNotFoundError:
        segment, offset = 0, 0
    except ValueError:
        return True  # damaged: the replay says how
    for path in directory.glob(f"*{_SUFFIX}"):
        if not path.stem.isdigit() or int(path.stem) < segment:
            continue
        if int(path.stem) > segment or path.stat().st_size > offset:
            return True
    return False


class SegmentLog:
    """The segments under `directory`; one writer (`append`, `sync`, `drained`)."""

    def __init__(self, directory: Path, segment_bytes: int = 16 << 20) -> None:
        self.directory = directory
        self._segment_bytes = segment_bytes
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        self._fd: int | None = None
        self._segment = 0
        self._offset = 0
        # Segments this writer opened fresh (every frame in them seeded): only those
        # become spares. A spare file on disk is always one of them, of some run.
        self._mine: set[int] = set()
        self._spares = sorted(directory.glob(f"*{_SPARE}"))

    # --- start ------------------------------------------------------------------------

    def read_position(self) -> Position:
        path = self.directory / _POSITION
        try:
            segment, offset = path.read_text().split()
        except FileNotFoundError:
            return Position(0, 0)
        except ValueError as err:
            raise LogDamaged(f"{path}: not a log position") from err
        return Position(int(segment), int(offset))

    def segments(self) -> list[int]:
        return sorted(int(p.stem) for p in self.directory.glob(f"*{_SUFFIX}") if p.stem.isdigit())

    def recover(self) -> Iterator[tuple[bytes, Position]]:
        """Every frame past the drained position, with the position after it; truncates
        a torn tail of the last segment. Then `append` continues after the last frame."""
        start = self.read_position()
        numbers = [n for n in self.segments() if n >= start.segment]
        last = numbers[-1] if numbers else start.segment
        for number in numbers:
            path = self.directory / _name(number)
            data = path.read_bytes()
            offset = start.offset if number == start.segment else 0
            while offset < len(data):
                frame = _frame_at(data, offset, number)
                if frame is None:
                    if number != last:
                        raise LogDamaged(
                            f"{path}: a bad frame at byte {offset} before the last segment"
                        )
                    with open(path, "r+b") as torn:  # never acknowledged: cut it off
                        torn.truncate(offset)
                        os.fsync(torn.fileno())
                    break
                payload, offset = frame
                yield payload, Position(number, offset)
        self._segment = last
        self._open(last)

    # --- the writer -------------------------------------------------------------------

    def _open(self, number: int, fresh: bool = False) -> None:
        """Open segment `number` to append to (`fresh`: a new one, over a spare file's
        blocks when there is one)."""
        path = self.directory / _name(number)
        if fresh and self._spares:
            with contextlib.suppress(FileNotFoundError):  # gone: a new file, then
                os.replace(self._spares.pop(), path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)
        self._fd, self._segment = fd, number
        self._offset = 0 if fresh else os.fstat(fd).st_size
        if fresh:
            self._mine.add(number)
        _fsync_dir(self.directory)

    @property
    def end(self) -> Position:
        return Position(self._segment, self._offset)

    def append(self, payload: bytes) -> Position:
        """Write one frame (durable after the next `sync`); returns the position after
        it. On an error the frame is cut off again (or the error says the log is lost
        for writing)."""
        if self._fd is None:
            self._open(self._segment)
        assert self._fd is not None
        if self._offset >= self._segment_bytes:
            self._cut()
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            self._open(self._segment + 1, fresh=True)
            assert self._fd is not None
        frame = encode(payload, self._segment)
        before = self._offset
        try:
            written = os.pwrite(self._fd, frame, before)
            if written != len(frame):
                raise OSError(f"short write to the log: {written} of {len(frame)} bytes")
        except OSError:
            os.ftruncate(self._fd, before)
            raise
        self._offset = before + len(frame)
        return Position(self._segment, self._offset)

    def _cut(self) -> None:
        """The open segment ends at its last frame (a recycled file's rest cut off)."""
        assert self._fd is not None
        if os.fstat(self._fd).st_size > self._offset:
            os.ftruncate(self._fd, self._offset)

    def sync(self) -> None:
        """The data and what reading it needs (the file's size): `fdatasync`, which
        skips the timestamps `fsync` would also write."""
        if self._fd is not None:
            _datasync(self._fd)

    def drained(self, position: Position) -> None:
        """The store holds everything before `position`: record it, drop older segments."""
        temporary = self.directory / f"{_POSITION}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{position.segment} {position.offset}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.directory / _POSITION)
        _fsync_dir(self.directory)
        for number in self.segments():
            if number < position.segment:
                path = self.directory / _name(number)
                if number in self._mine and len(self._spares) < SPARES:
                    spare = path.with_suffix(_SPARE)
                    os.replace(path, spare)  # durable or not: below the position either way
                    self._spares.append(spare)
                else:
                    path.unlink(missing_ok=True)
                self._mine.discard(number)

    def close(self) -> None:
        if self._fd is not None:
            self._cut()
            os.close(self._fd)
            self._fd = None


def _frame_at(data: bytes, offset: int, segment: int) -> tuple[bytes, int] | None:
    """(payload, offset after it) of the frame at `offset` of segment `segment`, None
    when it is torn or bad (or another segment's: a recycled file's old frames)."""
    end = offset + _HEAD.size
    if end > len(data):
        return None
    length, crc = _HEAD.unpack_from(data, offset)
    seeded = bool(length & _SEEDED)
    length &= ~_SEEDED
    if length > MAX_FRAME_BYTES or end + length > len(data):
        return None
    payload = data[end : end + length]
    if zlib.crc32(payload, _seed(segment) if seeded else 0) != crc:
        return None
    return payload, end + length
