# module: attention_sm90a.cu
# tests: TestConformance
# A sliding window of W keys that lets each row see W + 1 (its lower edge
# one key too early): the windowed cases fail.
s/^  return (int)max(0LL, min(pos - p.window + 1, sk));$/  return (int)max(0LL, min(pos - p.window, sk));/
