# module: attention_sm90a.cu
# tests: TestQuantLongRepeats
# quant_pack9's long form not clearing its ticket after a launch: the next
# launch's blocks draw tickets past its chunks and quantize nothing.
s/for (unsigned j = threadIdx.x; j < 2 + 2/for (unsigned j = threadIdx.x + 1; j < 2 + 2/
