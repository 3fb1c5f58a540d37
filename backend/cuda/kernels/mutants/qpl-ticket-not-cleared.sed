# module: attention_sm90a.cu
# tests: TestQuantLongRepeats
# quant_pack9's long form not clearing its ticket after a launch: the next
# launch's blocks draw tickets past its chunks and quantize nothing.
s/ words\[0\] = words\[1\] = 0u;  \/\/ every block has drawn/ words[1] = 0u;  \/\/ every block has drawn/
