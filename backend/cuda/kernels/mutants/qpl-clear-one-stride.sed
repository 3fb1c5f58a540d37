# module: attention_sm90a.cu
# tests: TestQuantLongRepeats
# quant_pack9's long form clearing its words in strides of two blocks'
# threads: past the first stride, words are left set for the next launch.
s/ j += NT) words\[j\] = 0u;/ j += 2 * NT) words[j] = 0u;/
