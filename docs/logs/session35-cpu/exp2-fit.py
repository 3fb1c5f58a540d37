import mpmath as mp, struct
mp.mp.dps = 30
def f32(x): return struct.unpack('f', struct.pack('f', float(x)))[0]
def fit(deg, N=400, iters=60):
    # p(f) = 1 + f*(c1 + c2 f + ... + c_deg f^(deg-1)); minimize max relative error on [0,1]
    xs = [mp.mpf(i)/N for i in range(N+1)]
    xs = [ (1-mp.cos(mp.pi*i/N))/2 for i in range(N+1)]
    w = [mp.mpf(1)]*len(xs)
    for it in range(iters):
        # weighted least squares: minimize sum w_i * ((1 + f q(f) - 2^f)/2^f)^2
        A = mp.matrix(deg, deg); b = mp.matrix(deg, 1)
        for x, wi in zip(xs, w):
            t = mp.power(2, x)
            row = [x**(k+1)/t for k in range(deg)]
            rhs = (t-1)/t
            for i in range(deg):
                b[i] += wi*row[i]*rhs
                for j in range(deg):
                    A[i,j] += wi*row[i]*row[j]
        c = mp.lu_solve(A, b)
        errs = []
        for x in xs:
            t = mp.power(2, x)
            p = 1 + sum(c[k]*x**(k+1) for k in range(deg))
            errs.append(abs(p-t)/t)
        s = sum(wi*e for wi, e in zip(w, errs))
        w = [wi*e/s for wi, e in zip(w, errs)]
    return [c[k] for k in range(deg)], max(errs)
for deg in (5, 6):
    c, e = fit(deg)
    print(deg, "max rel err %.3e" % e, [f32(x) for x in c], ["0x%08x" % struct.unpack('I', struct.pack('f', float(x)))[0] for x in c])
