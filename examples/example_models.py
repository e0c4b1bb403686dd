"""The examples' computations redone in Python, to check their output.

Each function follows the C code of its example step for step, with 32-bit
unsigned wrap-around where the C code has it.
"""

import zlib

MASK = 0xffffffff


class XorShift32:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        x = self.state
        x ^= (x << 13) & MASK
        x ^= x >> 17
        x ^= (x << 5) & MASK
        self.state = x
        return x


# examples/kernels

def kernels(rounds):
    n = 32
    matrix = crc = sort = 0
    for r in range(rounds):
        rng = XorShift32(0x9e3779b9 ^ ((r * 0x85ebca6b + 1) & MASK))
        a = [[0] * n for _ in range(n)]
        b = [[0] * n for _ in range(n)]
        for i in range(n):
            for j in range(n):
                a[i][j] = rng.next() % 201 - 100
                b[i][j] = rng.next() % 201 - 100
        data = bytes(rng.next() & 0xff for _ in range(2048))
        keys = [rng.next() for _ in range(160)]
        trace = sum(sum(a[i][k] * b[k][i] for k in range(n))
                    for i in range(n)) & MASK
        digest = 0
        for key in sorted(keys):
            digest = (digest * 31 + key) & MASK
        matrix = (matrix * 33 + trace) & MASK
        crc = (crc * 33 + zlib.crc32(data)) & MASK
        sort = (sort * 33 + digest) & MASK
    return "kernels rounds=%d matrix=%08x crc=%08x sort=%08x" % (
        rounds, matrix, crc, sort)


# examples/overlays

SIDE = 64


def crc16(data):
    crc = 0xffff
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xffff
    return crc


def count_primes(limit):
    marks = bytearray([1]) * limit
    marks[0:2] = b"\0\0"
    i = 2
    while i * i < limit:
        if marks[i]:
            marks[i * i::i] = bytes(len(range(i * i, limit, i)))
        i += 1
    return sum(marks)


def histogram_median(blurred):
    counts = [0] * 256
    for value in blurred:
        counts[value] += 1
    median = seen = 0
    while median < 255 and seen + counts[median] < SIDE * SIDE // 2:
        seen += counts[median]
        median += 1
    sample = sorted(blurred[(i * 61) % (SIDE * SIDE)] for i in range(64))
    return median << 8 | sample[32]


def overlays(rounds):
    blurred = bytearray(SIDE * SIDE)
    digest = 0
    for r in range(rounds):
        rng = XorShift32(0x2545f491 + r * 0x9e3779b9)
        picture = bytearray(((x + y) * 2 + (rng.next() & 31)) & 0xff
                            for y in range(SIDE) for x in range(SIDE))
        keys = [rng.next() for _ in range(400)]
        for y in range(1, SIDE - 1):
            for x in range(1, SIDE - 1):
                total = sum(picture[(y + dy) * SIDE + x + dx]
                            for dy in (-1, 0, 1) for dx in (-1, 0, 1))
                blurred[y * SIDE + x] = total // 9
        keys_digest = 0
        for key in sorted(keys):
            keys_digest = (keys_digest * 31 + key) & MASK
        for value in (crc16(blurred) ^ blurred[SIDE + 1],
                      count_primes(12000 - r % 100), crc16(picture),
                      keys_digest, histogram_median(blurred)):
            digest = (digest * 33 + value) & MASK
    return digest


# examples/pipeline

WIDTH, HEIGHT = 64, 48
FRAME = WIDTH * HEIGHT


def camera_frames(count):
    rng = XorShift32(0x1234567)
    frames = []
    for k in range(count):
        left, top = (3 * k) % (WIDTH - 16), (2 * k) % (HEIGHT - 16)
        frame = bytearray(FRAME)
        for y in range(HEIGHT):
            for x in range(WIDTH):
                v = x + y
                if left <= x < left + 16 and top <= y < top + 16:
                    v = 200
                frame[y * WIDTH + x] = (v + (rng.next() & 15)) & 0xff
        frames.append(bytes(frame))
    return frames


def denoise(frame):
    out = bytearray(frame)
    for y in range(1, HEIGHT - 1):
        for x in range(1, WIDTH - 1):
            window = sorted(frame[(y + dy) * WIDTH + x + dx]
                            for dy in (-1, 0, 1) for dx in (-1, 0, 1))
            out[y * WIDTH + x] = window[4]
    return out


def edges(d):
    def p(x, y):
        return d[y * WIDTH + x]
    count = 0
    for y in range(1, HEIGHT - 1):
        for x in range(1, WIDTH - 1):
            gx = (p(x + 1, y - 1) + 2 * p(x + 1, y) + p(x + 1, y + 1) -
                  p(x - 1, y - 1) - 2 * p(x - 1, y) - p(x - 1, y + 1))
            gy = (p(x - 1, y + 1) + 2 * p(x, y + 1) + p(x + 1, y + 1) -
                  p(x - 1, y - 1) - 2 * p(x, y - 1) - p(x + 1, y - 1))
            count += abs(gx) + abs(gy) >= 96
    return count


def otsu(d):
    histogram = [0] * 256
    for value in d:
        histogram[value] += 1
    total_sum = sum(level * n for level, n in enumerate(histogram))
    below = below_sum = best = threshold = 0
    for level in range(256):
        below += histogram[level]
        below_sum += level * histogram[level]
        above = FRAME - below
        if below == 0 or above == 0:
            continue
        diff = (total_sum - below_sum) * below - below_sum * above
        step = diff // FRAME if diff >= 0 else -(-diff // FRAME)
        score = (step * step) // (below * above)
        if score > best:
            best, threshold = score, level
    return threshold


def encode(d, threshold):
    a, b, runs, previous = 1, 0, 0, None
    for value in d:
        bit = 1 if value > threshold else 0
        if bit != previous:
            runs += 1
        previous = bit
        a = (a + bit) % 65521
        b = (b + a) % 65521
    return runs, b << 16 | a


def pipeline(frames):
    """(frame, mean, edges, threshold, runs, checksum) for each frame."""
    results = []
    for k, frame in enumerate(frames):
        d = denoise(frame)
        threshold = otsu(d)
        runs, checksum = encode(d, threshold)
        results.append((k, sum(frame) // FRAME, edges(d), threshold, runs,
                        checksum))
    return results


# examples/alias

ALIAS_ITERATIONS = 1000000


def alias_spin(iterations, seed):
    """loop.S's alias_spin: the digest of `iterations` passes of its
    7-instruction loop."""
    t0 = t1 = seed & MASK
    n = iterations
    while n:
        n -= 1
        t0 ^= n
        t1 = (t1 + t0) & MASK
        t1 ^= (t0 << 3) & MASK
        t1 = (t1 + n) & MASK
    return t1


def alias(rounds, iterations=ALIAS_ITERATIONS):
    digest = 0
    for r in range(rounds):
        digest = (digest * 33 + alias_spin(iterations, r)) & MASK
    return "alias rounds=%d digest=%08x" % (rounds, digest)
