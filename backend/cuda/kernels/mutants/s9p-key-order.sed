# module: attention_sm90a.cu
# tests: TestPagedTilesMatchGather
# The paged form masks its scores by the column's index, not by the key
# key_row put there: the causal and windowed cases must fail on it.
s/const int key = t \* SN + (KEYROWS ? (col \& ~31) | key_of_row(col \& 31) : col);/const int key = t * SN + col;/
