# module: attention_sm90a.cu
# tests: TestConformance
# The Hopper kernel's epilogues (unsplit, and a key split's parts)
# writing every column of its head dim, not only a smaller problem's: a
# row's padding columns land on the next head's (BSHD) or the next row's
# (BHSD) first columns.
s/^    if (col < d) \*(float2\*)(orow + col) = v;  \/\/ a head dim below D: its zero columns stay$/    *(float2*)(orow + col) = v;/
