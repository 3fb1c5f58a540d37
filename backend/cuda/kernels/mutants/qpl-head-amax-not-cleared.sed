# module: attention_sm90a.cu
# tests: TestQuantLongRepeats
# quant_pack9's long form leaving each head's amax word set after a launch:
# the next launch's heads take the larger of the two calls' amax.
s/ hw\[0\] = hw\[1\] = hw\[2\] = 0u;  \/\/ every chunk past its wait/ hw[1] = hw[2] = 0u;  \/\/ every chunk past its wait/
