# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The Q and K pack kernels reading the kernel's head dim from rows of a
# smaller one: the image form's padding columns hold the next row's codes
# where the tensor form's hold zeros.
s/^  if (row < rows \&\& col < p.d) {$/  if (row < rows \&\& col < D) {/
