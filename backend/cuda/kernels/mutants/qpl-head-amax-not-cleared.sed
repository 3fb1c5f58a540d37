# module: attention_sm90a.cu
# tests: TestQuantLongRepeats
# quant_pack9's long form leaving each head's amax word set after a launch:
# the next launch's heads take the larger of the two calls' amax.
s/ j += NT) words\[j\] = 0u;/ j += NT) if (j < 2 || j % 2 == 1) words[j] = 0u;/
