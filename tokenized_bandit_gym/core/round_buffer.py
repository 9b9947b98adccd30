"""Pre-drawn rounds of N independent round streams, kept on the device for the vector env."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from tokenized_bandit_gym.core.noise_model import NoiseModel
from tokenized_bandit_gym.core.round_streams import RoundStreams
from tokenized_bandit_gym.core.validation import check_int


class RoundBuffer:
    """The next ``capacity`` rounds (query index, noise) of each of N :class:`RoundStreams`.

    Row i owns its own streams, seeded like a single env's, so sub-env i of a vector env plays
    exactly the rounds of a single env with the same seed. The rounds are drawn ahead in
    blocks (:meth:`RoundStreams.draw_many`, equal to one-at-a-time draws) and copied to the
    device once per block, so starting a round costs a gather on the device and no host round
    trip. Every row starts at most one round per :meth:`advance`, so the furthest cursor can
    reach the end only after as many advances as it has rounds left: the buffer reads the
    cursors back then (once per ``capacity - 1`` advances at the most frequent), and tops every
    row up only when some row has used its last round. A round lasts several steps, so a
    refill (a loop over the rows' generators) comes that many times less often. On the CPU the
    buffers are shared with the host arrays: :meth:`advance` takes a NumPy mask and
    :meth:`current_on_host` reads them with NumPy (no torch dispatch per step).

    Args:
        num_rows: N.
        num_queries: Q, the query pool size.
        noise_model: the reward noise.
        capacity: rounds held per row (>= 2).
        device: where the current rounds are read.
    """

    def __init__(
        self,
        num_rows: int,
        num_queries: int,
        noise_model: NoiseModel,
        capacity: int,
        device: torch.device,
    ) -> None:
        self.num_rows = check_int("num_rows", num_rows, minimum=1)
        self.num_queries = check_int("num_queries", num_queries, minimum=1)
        self.capacity = check_int("capacity", capacity, minimum=2)
        self.noise_model = noise_model
        self.device = device
        self._streams: list[RoundStreams | None] = [None] * num_rows
        self._host_queries = np.zeros((num_rows, capacity), dtype=np.int64)  # (N, K)
        self._host_noise = np.zeros((num_rows, capacity), dtype=np.float64)  # (N, K)
        self._queries = torch.zeros(num_rows, capacity, dtype=torch.int64, device=device)  # (N, K)
        self._noise = torch.zeros(num_rows, capacity, dtype=torch.float64, device=device)  # (N, K)
        self._cursor = torch.zeros(num_rows, dtype=torch.int64, device=device)  # (N,) current round per row
        self._rows = torch.arange(num_rows, device=device)  # (N,)
        self._host_rows = np.arange(num_rows)  # (N,)
        self._row_starts = self._host_rows * capacity  # (N,) each row's start in the flattened (N, K) buffers
        self._cursor_view = self._cursor.numpy() if device.type == "cpu" else None  # (N,) the cursors' host view
        self._advances_since_check = 0
        self._headroom = capacity - 1  # advances before the furthest cursor can reach the last round

    def __getstate__(self) -> dict[str, object]:
        """The state to pickle, without the cursors' host view (a copy would no longer share their memory)."""
        return {**self.__dict__, "_cursor_view": None}

    def __setstate__(self, state: dict[str, object]) -> None:
        """Restore the pickled state and view the restored cursors again."""
        self.__dict__.update(state)
        self._cursor_view = self._cursor.numpy() if self.device.type == "cpu" else None

    def is_seeded(self, row: int) -> bool:
        """Whether row ``row`` has streams yet."""
        return self._streams[row] is not None

    def seed(self, rows: Sequence[int], seeds: Sequence[int]) -> None:
        """Give each of ``rows`` fresh streams from its seed; its current round is the first one."""
        if len(rows) != len(seeds):
            raise ValueError(f"got {len(rows)} rows but {len(seeds)} seeds")
        if not rows:
            return
        cursor = self._cursor.cpu().numpy()
        self._shift_and_refill(cursor)
        for row, seed in zip(rows, seeds, strict=True):
            streams = RoundStreams.from_seed(seed)
            self._streams[row] = streams
            queries, noise = streams.draw_many(self.num_queries, self.noise_model, self.capacity)
            self._host_queries[row], self._host_noise[row] = queries, noise
        self._upload()

    def advance(self, rows: torch.Tensor | np.ndarray) -> None:
        """Start the next round on ``rows`` ``(N,)`` bool (on the device, or a NumPy array when it is the CPU)."""
        self._make_room()
        if isinstance(rows, np.ndarray):
            cursor = self._host_cursor()
            cursor += rows
        else:
            self._cursor += rows.to(torch.int64)
        self._advances_since_check += 1

    def next_rounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The round each row would start at the next :meth:`advance`: query indices ``(N,)`` int64, noise ``(N,)``.

        What :meth:`current` returns on a row after :meth:`advance` starts its next round, read before
        it is known which rows advance (a captured step takes them as inputs). Makes room first, as
        :meth:`advance` does, so every row has a round after its current one; the :meth:`advance` that
        follows then needs no check.
        """
        self._make_room()
        column = (self._cursor + 1).clamp(max=self.capacity - 1)  # (N,) in range: _make_room left one spare round
        return self._queries[self._rows, column], self._noise[self._rows, column]

    def current(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current round of every row: query indices ``(N,)`` int64 and noise ``(N,)`` float64."""
        return self._queries[self._rows, self._cursor], self._noise[self._rows, self._cursor]

    def current_on_host(self, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`current` as new NumPy arrays, read from the host buffers (the device must be the CPU).

        Args:
            rows: ``(N,)`` bool, or None for every row: only these rows are read (the others hold
                0), so a step that starts R rounds reads R entries of the buffers, not N.
        """
        if rows is None:
            flat = self._row_starts + self._host_cursor()  # (N,) index into the flattened (N, K) buffers
            return self._host_queries.take(flat), self._host_noise.take(flat)
        index = rows.nonzero()[0]  # (R,)
        queries, noise = np.zeros(self.num_rows, dtype=np.int64), np.zeros(self.num_rows)  # (N,) each
        queries[index], noise[index] = self.current_rows(index)
        return queries, noise

    def current_rows(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The current round of the rows ``index`` ``(R,)``: query indices ``(R,)`` and noise ``(R,)``, new arrays.

        Read from the host buffers (the device must be the CPU): R entries, not N.
        """
        flat = self._row_starts.take(index) + self._host_cursor().take(index)  # (R,) into the flattened (N, K)
        return self._host_queries.take(flat), self._host_noise.take(flat)

    def _make_room(self) -> None:
        """Read the cursors back once the furthest may have reached its last round; refill every row if it has.

        Afterwards every cursor lies at most at ``capacity - 2`` until the next check is due: one more
        :meth:`advance` keeps every row within its rounds.
        """
        if self._advances_since_check < self._headroom:
            return
        cursor = self._cursor.cpu().numpy()
        furthest = int(cursor.max())
        if furthest >= self.capacity - 1:  # some row is on its last round
            self._shift_and_refill(cursor)
            self._upload()
        else:
            self._headroom = self.capacity - 1 - furthest
            self._advances_since_check = 0

    def _host_cursor(self) -> np.ndarray:
        """The cursors as a NumPy view (writes go through); raises off the CPU."""
        if self._cursor_view is None:
            raise ValueError(f"the round buffer lives on {self.device}: its cursors have no host view")
        return self._cursor_view

    def _shift_and_refill(self, cursor: np.ndarray) -> None:
        """Drop each row's finished rounds (before its cursor) and draw as many new ones."""
        columns = cursor[:, None] + np.arange(self.capacity)[None, :]  # (N, K)
        kept = columns < self.capacity  # (N, K)
        source = np.minimum(columns, self.capacity - 1)  # (N, K)
        rows = np.arange(self.num_rows)[:, None]  # (N, 1)
        self._host_queries = np.where(kept, self._host_queries[rows, source], 0)
        self._host_noise = np.where(kept, self._host_noise[rows, source], 0.0)
        for row in np.flatnonzero(cursor):
            streams = self._streams[row]
            if streams is None:
                continue
            count = int(cursor[row])
            queries, noise = streams.draw_many(self.num_queries, self.noise_model, count)
            self._host_queries[row, -count:], self._host_noise[row, -count:] = queries, noise
        self._advances_since_check = 0
        self._headroom = self.capacity - 1

    def _upload(self) -> None:
        """Copy the host buffers to the device; every cursor restarts at 0."""
        self._queries = torch.from_numpy(self._host_queries).to(self.device)
        self._noise = torch.from_numpy(self._host_noise).to(self.device)
        self._cursor = torch.zeros(self.num_rows, dtype=torch.int64, device=self.device)
        self._cursor_view = self._cursor.numpy() if self.device.type == "cpu" else None
