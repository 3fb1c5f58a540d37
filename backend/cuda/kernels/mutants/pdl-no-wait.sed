# module: attention_sm90a.cu paged.cu
# tests: TestAttentionQuantizingBitExact TestNewResidentMatchesUpload TestPagedAgainstCPU TestPagedConformance
# pdl_wait without griddepcontrol.wait: a kernel may read what the one
# before it has not yet written.
/^  asm volatile("griddepcontrol.wait;\\n" ::: "memory");$/d
