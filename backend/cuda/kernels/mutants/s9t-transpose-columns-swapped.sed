# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The one-tile tensor form's V transpose with the prmt selectors of a
# lane's two columns exchanged: every even column of V's transposed image
# takes its odd neighbour's codes. The tensor form's outputs then differ
# from the image form's, and TestNewResidentMatchesUpload must fail.
s|const uint32_t sel0 = swap ? 0x7531 : 0x6420, sel1 = swap ? 0x6420 : 0x7531;|const uint32_t sel0 = swap ? 0x6420 : 0x7531, sel1 = swap ? 0x7531 : 0x6420;|
