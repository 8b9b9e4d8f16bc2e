from fsscope.cli import main

raise SystemExit(main())
