"""Pre-drawn rounds of N independent round streams, kept on the device for the vector env."""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
import torch
from numba import typed

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
        # (query generators, noise generators, (N,) seeded) as Numba lists for the refill; rebuilt after seeding
        self._generators: tuple[typed.List, typed.List, np.ndarray] | None = None

    def __getstate__(self) -> dict[str, object]:
        """The state to pickle, without the cursors' host view and the generators' Numba lists (rebuilt on use)."""
        return {**self.__dict__, "_cursor_view": None, "_generators": None}

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
        self._generators = None
        self._upload()

    def advance(self, rows: torch.Tensor | np.ndarray) -> None:
        """Start the next round on ``rows`` ``(N,)`` bool (on the device, or a NumPy array when it is the CPU)."""
        if self._advances_since_check >= self._headroom:
            cursor = self._cursor.cpu().numpy()
            furthest = int(cursor.max())
            if furthest >= self.capacity - 1:  # some row is on its last round
                self._shift_and_refill(cursor)
                self._upload()
            else:
                self._headroom = self.capacity - 1 - furthest
                self._advances_since_check = 0
        if isinstance(rows, np.ndarray):
            cursor = self._host_cursor()
            cursor += rows
        else:
            self._cursor += rows.to(torch.int64)
        self._advances_since_check += 1

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

    def _host_cursor(self) -> np.ndarray:
        """The cursors as a NumPy view (writes go through); raises off the CPU."""
        if self._cursor_view is None:
            raise ValueError(f"the round buffer lives on {self.device}: its cursors have no host view")
        return self._cursor_view

    def _shift_and_refill(self, cursor: np.ndarray) -> None:
        """Drop each row's finished rounds (before its cursor) and draw as many new ones, in one compiled loop.

        Each row draws from its own generators (:func:`_shift_and_draw`: NumPy's bounded
        integers and normals or uniforms, the same bits as :meth:`RoundStreams.draw_many`), so
        sub-env i still replays a single env's rounds.
        """
        if self._generators is None:  # built once per seeding: boxing a generator costs ~17 us
            placeholder = np.random.default_rng(0)  # unseeded rows draw nothing (their rounds stay zero)
            query_rngs, noise_rngs = typed.List(), typed.List()
            for streams in self._streams:
                query_rngs.append(placeholder if streams is None else streams.query_rng)
                noise_rngs.append(placeholder if streams is None else streams.noise_rng)
            seeded = np.array([streams is not None for streams in self._streams])
            self._generators = (query_rngs, noise_rngs, seeded)
        _shift_and_draw(
            self._host_queries,
            self._host_noise,
            cursor,
            *self._generators,
            self.num_queries,
            float(self.noise_model.scale),
            self.noise_model.kind == "gaussian",
        )
        self._advances_since_check = 0
        self._headroom = self.capacity - 1

    def _upload(self) -> None:
        """Copy the host buffers to the device; every cursor restarts at 0."""
        self._queries = torch.from_numpy(self._host_queries).to(self.device)
        self._noise = torch.from_numpy(self._host_noise).to(self.device)
        self._cursor = torch.zeros(self.num_rows, dtype=torch.int64, device=self.device)
        self._cursor_view = self._cursor.numpy() if self.device.type == "cpu" else None


@numba.njit(cache=True, nogil=True)
def _shift_and_draw(
    queries: np.ndarray,
    noise: np.ndarray,
    cursor: np.ndarray,
    query_rngs: typed.List,
    noise_rngs: typed.List,
    seeded: np.ndarray,
    num_queries: int,
    scale: float,
    gaussian: bool,
) -> None:
    """Shift each row's rounds left by its cursor and draw as many new ones at its end, in place.

    Args:
        queries: ``(N, K)`` int64 the buffered query indices.
        noise: ``(N, K)`` float64 the buffered noise.
        cursor: ``(N,)`` int64 the rounds each row has used (``0 <= cursor < K``).
        query_rngs: N generators of the query draws (a row's :attr:`RoundStreams.query_rng`).
        noise_rngs: N generators of the noise draws.
        seeded: ``(N,)`` bool whether a row has streams (an unseeded row's new rounds are zeros).
        num_queries: Q.
        scale: the noise scale; gaussian: ``N(0, 1) * scale``, else ``U(-1, 1) * scale``
            (:meth:`NoiseModel.sample_many`).
        gaussian: the noise kind.
    """
    num_rows, capacity = queries.shape
    for row in range(num_rows):
        count = cursor[row]
        if count == 0:
            continue
        kept = capacity - count
        for column in range(kept):  # forward: each source lies after its target
            queries[row, column] = queries[row, column + count]
            noise[row, column] = noise[row, column + count]
        if not seeded[row]:
            queries[row, kept:] = 0
            noise[row, kept:] = 0.0
        else:
            queries[row, kept:] = query_rngs[row].integers(0, num_queries, size=count)
            if gaussian:
                noise[row, kept:] = noise_rngs[row].normal(0.0, 1.0, size=count) * scale
            else:
                noise[row, kept:] = noise_rngs[row].uniform(-1.0, 1.0, size=count) * scale
