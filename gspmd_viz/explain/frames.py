"""Stack frames of a compiled module: `stack_frame_id=N` -> the user's file and line.

The module text names each instruction's frame (`metadata={op_name=... stack_frame_id=N}`) but
no file or line. The serialized HloModuleProto carries the index that resolves N (field 17,
`stack_frame_index`): file_names (1), function_names (2), file_locations (3: file_name_id,
function_name_id, line, column) and stack_frames (4: file_location_id, parent_frame_id); every
id is 1-based and 0 means none. Decoded here from the protobuf wire format directly, so no
generated XLA proto module is needed.
"""

from __future__ import annotations

import dataclasses

_INDEX_FIELD = 17  # HloModuleProto.stack_frame_index


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes):
    """(field number, value) of each field of one message: ints for varints, bytes for
    length-delimited fields; fixed-width fields are skipped."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(buf, i)
            yield number, buf[i : i + size]
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"cannot read protobuf wire type {wire} (field {number})")


def _ints(buf: bytes, count: int) -> list[int]:
    """The first `count` varint fields of a small message (absent ones are 0)."""
    out = [0] * count
    for number, value in _fields(buf):
        if 1 <= number <= count and isinstance(value, int):
            out[number - 1] = value
    return out


@dataclasses.dataclass(frozen=True)
class Location:
    file: str
    function: str
    line: int

    def __str__(self) -> str:
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"


@dataclasses.dataclass(frozen=True)
class FrameIndex:
    """frame id -> (its Location, its parent frame id), as the compiled module recorded them."""

    frames: dict

    def chain(self, frame_id: int) -> list[Location]:
        """The frame's call stack, innermost first (empty for an unknown id)."""
        out, seen = [], set()
        while frame_id in self.frames and frame_id not in seen:
            seen.add(frame_id)
            location, frame_id = self.frames[frame_id]
            out.append(location)
        return out


def frame_index(module_proto: bytes) -> FrameIndex:
    """The stack-frame index of a serialized HloModuleProto."""
    files, functions, locations, frames = [], [], [], []
    for number, value in _fields(module_proto):
        if number != _INDEX_FIELD:
            continue
        for part, item in _fields(value):
            {1: files, 2: functions, 3: locations, 4: frames}.get(part, []).append(item)
    files = [f.decode() for f in files]
    functions = [f.decode() for f in functions]
    places = []
    for buf in locations:
        file_id, function_id, line, _ = _ints(buf, 4)
        places.append(Location(files[file_id - 1], functions[function_id - 1], line))
    resolved = {}
    for k, buf in enumerate(frames, start=1):
        location_id, parent = _ints(buf, 2)
        resolved[k] = (places[location_id - 1], parent)
    return FrameIndex(resolved)
