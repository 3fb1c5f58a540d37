# module: attention_sm90a.cu
# tests: TestPagedTilesMatchGather
# The paged form's producer reads tile t's pages from the chunk's entry t
# mod RING: every case of more than RING tiles must fail on it.
s/const int s = t % RING, c = t % CHUNK;/const int s = t % RING, c = t % RING;/
