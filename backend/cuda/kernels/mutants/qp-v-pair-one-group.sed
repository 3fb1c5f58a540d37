# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# Both threads of a pair take the even group of V's image: the odd
# groups' codes are never written.
s/^      const int d = 4 \* (idx \/ 2 % DQ), g = 2 \* (p0 + idx \/ 2 \/ DQ) + idx % 2, tile/      const int d = 4 * (idx \/ 2 % DQ), g = 2 * (p0 + idx \/ 2 \/ DQ), tile/
