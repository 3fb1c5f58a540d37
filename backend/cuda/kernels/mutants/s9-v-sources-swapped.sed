# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# The quantizing form's V addresses with keys 8 and 9 of each quad's group
# swapped.
s/^    int dk = 32 \* (i \/ 4) + sigma(i % 4);$/    int dk = 32 * (i \/ 4) + sigma(i % 4);\n    if (dk \& 8) dk ^= 1;/
