#!/usr/bin/python3
"""Writes a minute of 16 kHz mono audio (raw float32, little-endian) for the Silero VAD
streaming test: sentences spoken by espeak-ng (Debian's; several voices and speeds), between
stretches of near silence and of noise, so that the detector's probability moves through its
whole range. Seeded: the same audio on every run of the same espeak-ng.

  make_audio.py OUT_FILE
"""
import os
import subprocess
import sys
import tempfile
import wave

import numpy as np

RATE = 16000
SENTENCES = [
    "Lockstep serves what was trained, exactly as it was trained.",
    "The quick brown fox jumps over the lazy dog.",
    "A voice activity detector decides, every thirty two milliseconds, whether someone is speaking.",
    "Please hold the line while we connect your call.",
    "Seven hundred and forty two requests were answered in under a second.",
    "It was the best of times, it was the worst of times.",
]


def speak(text, voice, speed):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "speech.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", path, text], check=True)
        with wave.open(path) as w:
            rate, frames = w.getframerate(), w.readframes(w.getnframes())
    pcm = np.frombuffer(frames, dtype="<i2").astype(np.float64) / 32768.0
    # To 16 kHz by linear interpolation (espeak-ng speaks at 22.05 kHz).
    t = np.arange(int(len(pcm) * RATE / rate)) * rate / RATE
    return np.interp(t, np.arange(len(pcm)), pcm)


def main():
    rng = np.random.default_rng(56)
    parts, total, spoken = [], 0, 0
    while total < 60 * RATE:
        kind = ["speech", "silence", "noise"][spoken % 2 and int(rng.integers(1, 3)) or 0]
        if kind == "speech":
            text = SENTENCES[spoken // 2 % len(SENTENCES)]
            part = 0.7 * speak(text, rng.choice(["en", "en-us", "en-gb-x-rp"]), int(rng.integers(130, 190)))
            part += rng.normal(0, 0.002, len(part))
        elif kind == "silence":
            part = rng.normal(0, 0.002, int(rng.uniform(0.5, 2.0) * RATE))
        else:
            part = rng.normal(0, rng.uniform(0.02, 0.1), int(rng.uniform(0.5, 1.5) * RATE))
        spoken += 1
        parts.append(part)
        total += len(part)
    audio = np.concatenate(parts)[: 60 * RATE].astype("<f4")
    audio.tofile(sys.argv[1])


if __name__ == "__main__":
    main()
