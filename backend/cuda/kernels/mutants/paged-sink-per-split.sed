# module: paged.cu
# tests: TestPagedVariants TestPagedConformance
# The sink joins the denominator of every split's partial rows as well as
# the merged row's (added per split, not once): the sinks cases split over
# the keys must fail on it.
s/if (p.sinks != nullptr \&\& p.splits == 1 \&\& rs.L > 0.f)/if (p.sinks != nullptr \&\& rs.L > 0.f)/
