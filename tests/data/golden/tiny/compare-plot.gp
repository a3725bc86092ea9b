# offsim plots: feed to gnuplot (5.2 or later), e.g. `gnuplot FILE`.
set encoding utf8

# ---- comparison
$policies << EOD
1.28125 25
1.171875 25.19505538
1.234375 28.13003692
1.1484375 34
EOD
$front << EOD
1.1484375 34
1.171875 25.19505538
1.28125 25
EOD
$bars << EOD
0 25 0 0 0 0
1 25 0 0 0 0.1950553833
2 25 3 0 0 0.1300369222
3 25 9 0 0 0
EOD
set terminal pngcairo size 1400,680 font 'sans,10' noenhanced background rgb 'white'
set output 'comparison.png'
reset
set multiplot layout 1,2 title 'tiny uniform model' . "\n" . 'every policy compared' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 2
set linetype 2 lc rgb '#f28e2b' lw 2 pt 7 ps 2
set linetype 3 lc rgb '#e15759' lw 2 pt 7 ps 2
set linetype 4 lc rgb '#76b7b2' lw 2 pt 7 ps 2
set bmargin 7
set title 'step time against peak device memory (lower left is better)'
set xlabel 'peak device memory (GiB); device capacity 80.0 GiB is far right, not drawn'
set ylabel 'step time (ms)'
set grid lc rgb '#d0d0d0'
set offsets graph 0.1, graph 0.1, graph 0.12, graph 0.12
set key outside below center horizontal reverse Left samplen 1.5 maxcols 3
plot $front using 1:2 with lines lw 10 lc rgb '#d9d9d9' title 'Pareto front of what fits', \
     $front using 1:2 with points pt 6 ps 3.5 lw 1.5 lc rgb '#333333' notitle, \
     $policies every ::0::0 using 1:2 with points lt 1 title 'resident', \
     $policies every ::1::1 using 1:2 with points lt 2 title 'async', \
     $policies every ::2::2 using 1:2 with points lt 3 title 'hybrid', \
     $policies every ::3::3 using 1:2 with points lt 4 title 'checkpoint'
set title 'where the step time goes'
unset xlabel
set ylabel 'time (ms)'
set offsets 0, 0, graph 0.1, 0
unset grid
set grid ytics lc rgb '#d0d0d0'
set yrange [0:*]
set xrange [-0.6:3.6]
set xtics scale 0 ('resident' 0, 'async' 1, 'hybrid' 2, 'checkpoint' 3)
plot $bars using 1:(0+$2/2):($1-0.3):($1+0.3):(0):(0+$2) with boxxyerror fs solid 1.0 noborder lc rgb '#4e79a7' title 'compute', \
     $bars using 1:(0+$2+$3/2):($1-0.3):($1+0.3):(0+$2):(0+$2+$3) with boxxyerror fs solid 1.0 noborder lc rgb '#b07aa1' title 'recompute', \
     $bars using 1:(0+$2+$3+$4/2):($1-0.3):($1+0.3):(0+$2+$3):(0+$2+$3+$4) with boxxyerror fs solid 1.0 noborder lc rgb '#bab0ac' title 'optimizer', \
     $bars using 1:(0+$2+$3+$4+$5/2):($1-0.3):($1+0.3):(0+$2+$3+$4):(0+$2+$3+$4+$5) with boxxyerror fs solid 1.0 noborder lc rgb '#76b7b2' title 'communication', \
     $bars using 1:(0+$2+$3+$4+$5+$6/2):($1-0.3):($1+0.3):(0+$2+$3+$4+$5):(0+$2+$3+$4+$5+$6) with boxxyerror fs solid 1.0 noborder lc rgb '#e15759' title 'exposed transfer', \
     $bars using 1:(0+$2+$3+$4+$5+$6):(sprintf('%.1f ms', 0+$2+$3+$4+$5+$6)) with labels offset 0,0.8 notitle
unset multiplot
unset output
set terminal svg size 1400,680 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'comparison.svg'
reset
set multiplot layout 1,2 title 'tiny uniform model' . "\n" . 'every policy compared' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 2
set linetype 2 lc rgb '#f28e2b' lw 2 pt 7 ps 2
set linetype 3 lc rgb '#e15759' lw 2 pt 7 ps 2
set linetype 4 lc rgb '#76b7b2' lw 2 pt 7 ps 2
set bmargin 7
set title 'step time against peak device memory (lower left is better)'
set xlabel 'peak device memory (GiB); device capacity 80.0 GiB is far right, not drawn'
set ylabel 'step time (ms)'
set grid lc rgb '#d0d0d0'
set offsets graph 0.1, graph 0.1, graph 0.12, graph 0.12
set key outside below center horizontal reverse Left samplen 1.5 maxcols 3
plot $front using 1:2 with lines lw 10 lc rgb '#d9d9d9' title 'Pareto front of what fits', \
     $front using 1:2 with points pt 6 ps 3.5 lw 1.5 lc rgb '#333333' notitle, \
     $policies every ::0::0 using 1:2 with points lt 1 title 'resident', \
     $policies every ::1::1 using 1:2 with points lt 2 title 'async', \
     $policies every ::2::2 using 1:2 with points lt 3 title 'hybrid', \
     $policies every ::3::3 using 1:2 with points lt 4 title 'checkpoint'
set title 'where the step time goes'
unset xlabel
set ylabel 'time (ms)'
set offsets 0, 0, graph 0.1, 0
unset grid
set grid ytics lc rgb '#d0d0d0'
set yrange [0:*]
set xrange [-0.6:3.6]
set xtics scale 0 ('resident' 0, 'async' 1, 'hybrid' 2, 'checkpoint' 3)
plot $bars using 1:(0+$2/2):($1-0.3):($1+0.3):(0):(0+$2) with boxxyerror fs solid 1.0 noborder lc rgb '#4e79a7' title 'compute', \
     $bars using 1:(0+$2+$3/2):($1-0.3):($1+0.3):(0+$2):(0+$2+$3) with boxxyerror fs solid 1.0 noborder lc rgb '#b07aa1' title 'recompute', \
     $bars using 1:(0+$2+$3+$4/2):($1-0.3):($1+0.3):(0+$2+$3):(0+$2+$3+$4) with boxxyerror fs solid 1.0 noborder lc rgb '#bab0ac' title 'optimizer', \
     $bars using 1:(0+$2+$3+$4+$5/2):($1-0.3):($1+0.3):(0+$2+$3+$4):(0+$2+$3+$4+$5) with boxxyerror fs solid 1.0 noborder lc rgb '#76b7b2' title 'communication', \
     $bars using 1:(0+$2+$3+$4+$5+$6/2):($1-0.3):($1+0.3):(0+$2+$3+$4+$5):(0+$2+$3+$4+$5+$6) with boxxyerror fs solid 1.0 noborder lc rgb '#e15759' title 'exposed transfer', \
     $bars using 1:(0+$2+$3+$4+$5+$6):(sprintf('%.1f ms', 0+$2+$3+$4+$5+$6)) with labels offset 0,0.8 notitle
unset multiplot
unset output

# ---- memory
$memory0 << EOD
0 1 0
0 1.0234375 0
0 1.0546875 0
0 1.1171875 0
2 1.0546875 0
2 1.078125 0
2 1.109375 0
2 1.171875 0
4 1.109375 0
4 1.1328125 0
4 1.1640625 0
4 1.2265625 0
6 1.1640625 0
6 1.1875 0
6 1.21875 0
6 1.28125 0
9 1.21875 0
9 1.28125 0
13 1.21875 0
13 1.1953125 0
13 1.1640625 0
13 1.2265625 0
17 1.1640625 0
17 1.140625 0
17 1.109375 0
17 1.171875 0
21 1.109375 0
21 1.0859375 0
21 1.0546875 0
21 1.1171875 0
25 1.0546875 0
25 1.03125 0
25 1 0
25 1 0
EOD
$memory1 << EOD
0 1 0
0 1.0234375 0
0 1.0546875 0
0 1.1171875 0
2 1.0546875 0
2 1.0546875 0.0234375
2 1.078125 0.0234375
2 1.109375 0.0234375
2 1.171875 0.0234375
2.465560436 1.1484375 0.0234375
2.465560436 1.1484375 0.0546875
3.083641018 1.1171875 0.0546875
4.032509231 1.0546875 0.0546875
4.032509231 1.0546875 0.078125
4.032509231 1.078125 0.078125
4.032509231 1.109375 0.078125
4.032509231 1.171875 0.078125
4.498069667 1.1484375 0.078125
4.498069667 1.1484375 0.109375
5.116150249 1.1171875 0.109375
6.065018461 1.0546875 0.109375
6.065018461 1.0546875 0.1328125
6.065018461 1.078125 0.1328125
6.065018461 1.109375 0.1328125
6.065018461 1.171875 0.1328125
6.530578897 1.1484375 0.1328125
6.530578897 1.1484375 0.1640625
7.148659479 1.1171875 0.1640625
9.097527692 1.0546875 0.1640625
9.097527692 1.078125 0.1640625
9.097527692 1.140625 0.1640625
9.563088128 1.140625 0.140625
9.563088128 1.171875 0.140625
10.18116871 1.171875 0.109375
13.13003692 1.109375 0.109375
13.13003692 1.0859375 0.109375
13.13003692 1.0546875 0.109375
13.13003692 1.078125 0.109375
13.13003692 1.140625 0.109375
13.59559736 1.140625 0.0859375
13.59559736 1.171875 0.0859375
14.21367794 1.171875 0.0546875
17.16254615 1.109375 0.0546875
17.16254615 1.0859375 0.0546875
17.16254615 1.0546875 0.0546875
17.16254615 1.078125 0.0546875
17.16254615 1.140625 0.0546875
17.62810659 1.140625 0.03125
17.62810659 1.171875 0.03125
18.24618717 1.171875 0
21.19505538 1.109375 0
21.19505538 1.0859375 0
21.19505538 1.0546875 0
21.19505538 1.1171875 0
25.19505538 1.0546875 0
25.19505538 1.03125 0
25.19505538 1 0
25.19505538 1 0
EOD
$memory2 << EOD
0 1 0
0 1.0234375 0
0 1.0546875 0
0 1.1171875 0
2 1.0546875 0
2 1.078125 0
2 1.109375 0
2 1.171875 0
4 1.109375 0
4 1.109375 0.0234375
4 1.1328125 0.0234375
4 1.1640625 0.0234375
4 1.2265625 0.0234375
4.465560436 1.203125 0.0234375
4.465560436 1.203125 0.0546875
5.083641018 1.171875 0.0546875
6.032509231 1.109375 0.0546875
6.032509231 1.109375 0.078125
6.032509231 1.1171875 0.078125
6.032509231 1.1796875 0.078125
6.498069667 1.15625 0.078125
6.498069667 1.15625 0.109375
7.116150249 1.125 0.109375
9.065018461 1.0625 0.109375
9.065018461 1.0859375 0.109375
9.065018461 1.109375 0.109375
9.065018461 1.140625 0.109375
9.065018461 1.203125 0.109375
9.530578897 1.203125 0.0859375
9.530578897 1.234375 0.0859375
10.14865948 1.234375 0.0546875
12.09752769 1.171875 0.0546875
12.09752769 1.234375 0.0546875
16.09752769 1.171875 0.0546875
16.09752769 1.1484375 0.0546875
16.09752769 1.1171875 0.0546875
16.09752769 1.109375 0.0546875
16.09752769 1.1328125 0.0546875
16.09752769 1.1953125 0.0546875
16.56308813 1.1953125 0.03125
16.56308813 1.2265625 0.03125
17.18116871 1.2265625 0
20.13003692 1.1640625 0
20.13003692 1.140625 0
20.13003692 1.109375 0
20.13003692 1.171875 0
24.13003692 1.109375 0
24.13003692 1.0859375 0
24.13003692 1.0546875 0
24.13003692 1.1171875 0
28.13003692 1.0546875 0
28.13003692 1.03125 0
28.13003692 1 0
28.13003692 1 0
EOD
$memory3 << EOD
0 1 0
0 1.0078125 0
0 1.0703125 0
2 1.0078125 0
2 1.015625 0
2 1.078125 0
4 1.015625 0
4 1.0234375 0
4 1.0859375 0
6 1.0234375 0
6 1.03125 0
6 1.09375 0
9 1.03125 0
9 1.0546875 0
9 1.0859375 0
9 1.1484375 0
12 1.0859375 0
12 1.1484375 0
16 1.0859375 0
16 1.0625 0
16 1.03125 0
16 1.0234375 0
16 1.046875 0
16 1.078125 0
16 1.140625 0
18 1.078125 0
18 1.140625 0
22 1.078125 0
22 1.0546875 0
22 1.0234375 0
22 1.015625 0
22 1.0390625 0
22 1.0703125 0
22 1.1328125 0
24 1.0703125 0
24 1.1328125 0
28 1.0703125 0
28 1.046875 0
28 1.015625 0
28 1.0078125 0
28 1.03125 0
28 1.0625 0
28 1.125 0
30 1.0625 0
30 1.125 0
34 1.0625 0
34 1.0390625 0
34 1.0078125 0
34 1 0
34 1 0
EOD
$peaks << EOD
6 1.28125 1
2 1.171875 2
9.530578897 1.234375 3
9 1.1484375 4
EOD
set terminal pngcairo size 1400,887 font 'sans,10' noenhanced background rgb 'white'
set output 'memory.png'
reset
set multiplot title 'tiny uniform model' . "\n" . 'device and host memory over the step' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 1.5
set linetype 2 lc rgb '#f28e2b' lw 2 pt 7 ps 1.5
set linetype 3 lc rgb '#e15759' lw 2 pt 7 ps 1.5
set linetype 4 lc rgb '#76b7b2' lw 2 pt 7 ps 1.5
set lmargin at screen 0.07
set rmargin at screen 0.80
set grid lc rgb '#d0d0d0'
set key outside right top reverse Left
set xrange [0:34]
set tmargin at screen 0.9210822999
set bmargin at screen 0.4926719278
set ylabel 'device memory (GiB)'
set format x ''
set yrange [0.95:1.33125]
plot $memory0 using 1:2 with steps lt 1 title 'resident', \
     $memory1 using 1:2 with steps lt 2 title 'async', \
     $memory2 using 1:2 with steps lt 3 title 'hybrid', \
     $memory3 using 1:2 with steps lt 4 title 'checkpoint', \
     $peaks using 1:2:3 with points lc variable pt 7 ps 1.6 notitle, \
     NaN with points lc rgb '#333333' pt 7 ps 1.6 title 'peak'
unset arrow 1
unset key
set format x '%g'
set tmargin at screen 0.4419391206
set bmargin at screen 0.2728297632
set ylabel 'host pinned (GiB)'
set xlabel 'time since the step started (ms)'
set yrange [0:0.18046875]
set label 1 'device capacity 80.0 GiB, far above every peak: not drawn, to keep the curves apart' at screen 0.07, screen 0.2051860203 left
set label 2 'resident: device peak 1.28 GiB at 6.00 ms (forward L3), host peak 0 B' at screen 0.07, screen 0.1848928974 left tc rgb '#4e79a7'
set label 3 '    live at the device peak: static 1.00 GiB + saved L0-L3 224 MiB + workspace L3 64.0 MiB' at screen 0.07, screen 0.1645997745 left tc rgb '#4e79a7'
set label 4 'async: device peak 1.17 GiB at 2.00 ms (forward L1), host peak 168 MiB' at screen 0.07, screen 0.1443066516 left tc rgb '#a9631e'
set label 5 '    live at the device peak: static 1.00 GiB + saved L0-L1 112 MiB + workspace L1 64.0 MiB' at screen 0.07, screen 0.1240135287 left tc rgb '#a9631e'
set label 6 'hybrid: device peak 1.23 GiB at 9.53 ms (reload L2 mlp), host peak 112 MiB' at screen 0.07, screen 0.1037204059 left tc rgb '#bf494b'
set label 7 '    live at the device peak: static 1.00 GiB + saved 3 of L0-L3 168 MiB + workspace L3 64.0 MiB + input L3 8.00 MiB' at screen 0.07, screen 0.08342728298 left tc rgb '#bf494b'
set label 8 'checkpoint: device peak 1.15 GiB at 9.00 ms (recompute L3), host peak 0 B' at screen 0.07, screen 0.06313416009 left tc rgb '#4c7673'
set label 9 '    live at the device peak: static 1.00 GiB + workspace L3 64.0 MiB + saved L3 56.0 MiB + input L0-L3 32.0 MiB' at screen 0.07, screen 0.0428410372 left tc rgb '#4c7673'
plot $memory0 using 1:3 with steps lt 1 notitle , \
     $memory1 using 1:3 with steps lt 2 notitle , \
     $memory2 using 1:3 with steps lt 3 notitle , \
     $memory3 using 1:3 with steps lt 4 notitle 
unset multiplot
unset output
set terminal svg size 1400,887 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'memory.svg'
reset
set multiplot title 'tiny uniform model' . "\n" . 'device and host memory over the step' font ',12'
set linetype 1 lc rgb '#4e79a7' lw 2 pt 7 ps 1.5
set linetype 2 lc rgb '#f28e2b' lw 2 pt 7 ps 1.5
set linetype 3 lc rgb '#e15759' lw 2 pt 7 ps 1.5
set linetype 4 lc rgb '#76b7b2' lw 2 pt 7 ps 1.5
set lmargin at screen 0.07
set rmargin at screen 0.80
set grid lc rgb '#d0d0d0'
set key outside right top reverse Left
set xrange [0:34]
set tmargin at screen 0.9210822999
set bmargin at screen 0.4926719278
set ylabel 'device memory (GiB)'
set format x ''
set yrange [0.95:1.33125]
plot $memory0 using 1:2 with steps lt 1 title 'resident', \
     $memory1 using 1:2 with steps lt 2 title 'async', \
     $memory2 using 1:2 with steps lt 3 title 'hybrid', \
     $memory3 using 1:2 with steps lt 4 title 'checkpoint', \
     $peaks using 1:2:3 with points lc variable pt 7 ps 1.6 notitle, \
     NaN with points lc rgb '#333333' pt 7 ps 1.6 title 'peak'
unset arrow 1
unset key
set format x '%g'
set tmargin at screen 0.4419391206
set bmargin at screen 0.2728297632
set ylabel 'host pinned (GiB)'
set xlabel 'time since the step started (ms)'
set yrange [0:0.18046875]
set label 1 'device capacity 80.0 GiB, far above every peak: not drawn, to keep the curves apart' at screen 0.07, screen 0.2051860203 left
set label 2 'resident: device peak 1.28 GiB at 6.00 ms (forward L3), host peak 0 B' at screen 0.07, screen 0.1848928974 left tc rgb '#4e79a7'
set label 3 '    live at the device peak: static 1.00 GiB + saved L0-L3 224 MiB + workspace L3 64.0 MiB' at screen 0.07, screen 0.1645997745 left tc rgb '#4e79a7'
set label 4 'async: device peak 1.17 GiB at 2.00 ms (forward L1), host peak 168 MiB' at screen 0.07, screen 0.1443066516 left tc rgb '#a9631e'
set label 5 '    live at the device peak: static 1.00 GiB + saved L0-L1 112 MiB + workspace L1 64.0 MiB' at screen 0.07, screen 0.1240135287 left tc rgb '#a9631e'
set label 6 'hybrid: device peak 1.23 GiB at 9.53 ms (reload L2 mlp), host peak 112 MiB' at screen 0.07, screen 0.1037204059 left tc rgb '#bf494b'
set label 7 '    live at the device peak: static 1.00 GiB + saved 3 of L0-L3 168 MiB + workspace L3 64.0 MiB + input L3 8.00 MiB' at screen 0.07, screen 0.08342728298 left tc rgb '#bf494b'
set label 8 'checkpoint: device peak 1.15 GiB at 9.00 ms (recompute L3), host peak 0 B' at screen 0.07, screen 0.06313416009 left tc rgb '#4c7673'
set label 9 '    live at the device peak: static 1.00 GiB + workspace L3 64.0 MiB + saved L3 56.0 MiB + input L0-L3 32.0 MiB' at screen 0.07, screen 0.0428410372 left tc rgb '#4c7673'
plot $memory0 using 1:3 with steps lt 1 notitle , \
     $memory1 using 1:3 with steps lt 2 notitle , \
     $memory2 using 1:3 with steps lt 3 notitle , \
     $memory3 using 1:3 with steps lt 4 notitle 
unset multiplot
unset output

# ---- timeline-resident
$spans << EOD
0 2 2 0
2 4 2 0
4 6 2 0
6 9 2 0
9 13 2 1
13 17 2 1
17 21 2 1
21 25 2 1
EOD
set terminal pngcairo size 1400,340 font 'sans,10' noenhanced background rgb 'white'
set output 'timeline-resident.png'
reset
set title 'tiny uniform model' . "\n" . 'timeline of resident: step 25.00 ms = compute 25.00 + recompute 0.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.00' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9, graph 0 to 9, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward'
unset output
set terminal svg size 1400,340 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'timeline-resident.svg'
reset
set title 'tiny uniform model' . "\n" . 'timeline of resident: step 25.00 ms = compute 25.00 + recompute 0.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.00' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9, graph 0 to 9, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward'
unset output

# ---- timeline-async
$spans << EOD
0 2 2 0
2 2.465560436 1 3
2.465560436 3.083641018 1 3
2 4.032509231 2 0
4.032509231 4.498069667 1 3
4.498069667 5.116150249 1 3
4.032509231 6.065018461 2 0
6.065018461 6.530578897 1 3
6.530578897 7.148659479 1 3
6.065018461 9.097527692 2 0
9.097527692 9.563088128 0 4
9.563088128 10.18116871 0 4
9.097527692 13.13003692 2 1
13.13003692 13.59559736 0 4
13.59559736 14.21367794 0 4
13.13003692 17.16254615 2 1
17.16254615 17.62810659 0 4
17.62810659 18.24618717 0 4
17.16254615 21.19505538 2 1
21.19505538 25.19505538 2 1
EOD
set terminal pngcairo size 1400,340 font 'sans,10' noenhanced background rgb 'white'
set output 'timeline-async.png'
reset
set title 'tiny uniform model' . "\n" . 'timeline of async: step 25.20 ms = compute 25.00 + recompute 0.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.20' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9.097527692, graph 0 to 9.097527692, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9.097527692, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==3)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#a9631e' lw 0.5 lc rgb '#f28e2b' title 'D2H copy', \
     $spans using (($4==4)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#108590' lw 0.5 lc rgb '#17becf' title 'H2D copy'
unset output
set terminal svg size 1400,340 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'timeline-async.svg'
reset
set title 'tiny uniform model' . "\n" . 'timeline of async: step 25.20 ms = compute 25.00 + recompute 0.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.20' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9.097527692, graph 0 to 9.097527692, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9.097527692, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==3)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#a9631e' lw 0.5 lc rgb '#f28e2b' title 'D2H copy', \
     $spans using (($4==4)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#108590' lw 0.5 lc rgb '#17becf' title 'H2D copy'
unset output

# ---- timeline-hybrid
$spans << EOD
0 2 2 0
2 4 2 0
4 4.465560436 1 3
4.465560436 5.083641018 1 3
4 6.032509231 2 0
6.032509231 6.498069667 1 3
6.498069667 7.116150249 1 3
6.032509231 9.065018461 2 0
9.065018461 9.530578897 0 4
9.530578897 10.14865948 0 4
9.065018461 12.09752769 2 2
12.09752769 16.09752769 2 1
16.09752769 16.56308813 0 4
16.56308813 17.18116871 0 4
16.09752769 20.13003692 2 1
20.13003692 24.13003692 2 1
24.13003692 28.13003692 2 1
EOD
set terminal pngcairo size 1400,340 font 'sans,10' noenhanced background rgb 'white'
set output 'timeline-hybrid.png'
reset
set title 'tiny uniform model' . "\n" . 'timeline of hybrid: step 28.13 ms = compute 25.00 + recompute 3.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.13' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9.065018461, graph 0 to 9.065018461, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9.065018461, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute', \
     $spans using (($4==3)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#a9631e' lw 0.5 lc rgb '#f28e2b' title 'D2H copy', \
     $spans using (($4==4)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#108590' lw 0.5 lc rgb '#17becf' title 'H2D copy'
unset output
set terminal svg size 1400,340 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'timeline-hybrid.svg'
reset
set title 'tiny uniform model' . "\n" . 'timeline of hybrid: step 28.13 ms = compute 25.00 + recompute 3.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.13' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9.065018461, graph 0 to 9.065018461, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9.065018461, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute', \
     $spans using (($4==3)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#a9631e' lw 0.5 lc rgb '#f28e2b' title 'D2H copy', \
     $spans using (($4==4)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#108590' lw 0.5 lc rgb '#17becf' title 'H2D copy'
unset output

# ---- timeline-checkpoint
$spans << EOD
0 2 2 0
2 4 2 0
4 6 2 0
6 9 2 0
9 12 2 2
12 16 2 1
16 18 2 2
18 22 2 1
22 24 2 2
24 28 2 1
28 30 2 2
30 34 2 1
EOD
set terminal pngcairo size 1400,340 font 'sans,10' noenhanced background rgb 'white'
set output 'timeline-checkpoint.png'
reset
set title 'tiny uniform model' . "\n" . 'timeline of checkpoint: step 34.00 ms = compute 25.00 + recompute 9.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.00' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9, graph 0 to 9, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute'
unset output
set terminal svg size 1400,340 font 'sans-serif,10' noenhanced background rgb 'white'
set output 'timeline-checkpoint.svg'
reset
set title 'tiny uniform model' . "\n" . 'timeline of checkpoint: step 34.00 ms = compute 25.00 + recompute 9.00 + optimizer 0.00 + communication 0.00 + exposed transfer 0.00' offset 0,1
set tmargin 6
set bmargin 5.5
set lmargin 12
set xlabel 'time since the step started (ms)'
set grid xtics lc rgb '#d0d0d0'
set key outside bottom center horizontal reverse Left samplen 2
set xrange [0:34]
set yrange [-0.6:2.6]
set ytics scale 0 ('compute' 2, 'd2h' 1, 'h2d' 0)
set arrow 1 from 9, graph 0 to 9, graph 1 nohead dt 2 lw 2 lc rgb '#333333' front
set label 1 'forward | backward' at 9, graph 1 center offset 0,0.7
plot $spans using (($4==0)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#365474' lw 0.5 lc rgb '#4e79a7' title 'forward', \
     $spans using (($4==1)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#3e7037' lw 0.5 lc rgb '#59a14f' title 'backward', \
     $spans using (($4==2)?($1+$2)/2:NaN):3:1:2:($3-0.38):($3+0.38) with boxxyerror fs solid 1.0 border lc rgb '#7b5570' lw 0.5 lc rgb '#b07aa1' title 'recompute'
unset output
