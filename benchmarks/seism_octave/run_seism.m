% SEISM's own time (jponttuset/seism @ 6af0cad) on the BSDS500 human pairs, in Octave: eval_segm per pair and
% measure (every measure but fb), as SEISM's scripts call it; see bench_seism_octave.py for the set-up.
% Run from SEISM's root: octave-cli --eval "limit = 200; run_seism" (limit: the first pairs; all without it).
addpath('src/measures'); addpath('src/misc');
load('pairs.mat');
n = size(table, 1);
if exist('limit', 'var'), n = limit; end
measures = {'sc','ssc','pri','voi','nvoi','bce','gce','lce','dhd','sdhd','vd','bgm','fr','fop'};
out = zeros(n, 18);
t0 = cputime; w0 = tic;
for p = 1:n
  g = gts{table(p,1)};
  partition = uint32(g(:,:,table(p,2)));
  h = gts{table(p,3)};
  idx = gt_indices{p};
  gt = cell(1, numel(idx));
  for k = 1:numel(idx)
    m = uint32(h(:,:,idx(k)));
    if table(p,4), m = rot90(m, 1); end
    gt{k} = m;
  end
  c = 1;
  for q = 1:numel(measures)
    v = eval_segm(partition, gt, measures{q});
    out(p, c:c+numel(v)-1) = v; c = c + numel(v);
  end
end
printf('seism octave: %d pairs, %.1f s CPU, %.1f s wall\n', n, cputime - t0, toc(w0));
save('-v7', sprintf('seism_out_%d.mat', n), 'out');
